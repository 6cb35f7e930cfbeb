"""The "nlccl" backend of torch.distributed.

Importing this package registers the backend, after which

    import nlccl_torch
    torch.distributed.init_process_group("nlccl", rank=rank, world_size=world_size)

runs collectives of CPU tensors (and DDP) on nlccl. See docs/torch.md.
"""
import torch  # noqa: F401  (loads libtorch and the c10d types the extension builds on)
import torch.distributed as dist

from ._C import ProcessGroupNlccl, nlccl_version

__all__ = ["ProcessGroupNlccl", "BACKEND", "nlccl_version"]

#: The name to pass to torch.distributed.init_process_group / new_group.
BACKEND = "nlccl"


def _create_process_group(store, rank, world_size, timeout):
    return ProcessGroupNlccl(store, rank, world_size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)
