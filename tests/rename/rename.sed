# The whole port of a program from NCCL to nlccl (README: "porting is a prefix rename").
s/nccl/nlccl/g
s/NCCL/NLCCL/g
s/cudaStream_t/nlcclStream_t/g
