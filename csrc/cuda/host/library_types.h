/* The data type codes of NVIDIA's library_types.h that dtrain passes to cuBLAS (the host build's
 * copy; the values are NVIDIA's, so a stand-in and the real library read them alike). */
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
} cudaDataType;
