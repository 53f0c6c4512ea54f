// tapegrad.h — the whole public API of the autograd layer in one include.
#pragma once
#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/ops_from_table.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
