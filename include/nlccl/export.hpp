// Marks the declarations of the public C++ model API (libnlccl-sim.so exports them; everything
// else in nlccl is built with hidden visibility).
#pragma once

#define NLCCL_MODEL_API __attribute__((visibility("default")))
