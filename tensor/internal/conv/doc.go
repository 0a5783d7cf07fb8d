// Package conv holds the kernels behind package tensor's convolutions and
// windowed reductions: float32 convolution forward and backward (input and
// kernel gradients) in 1 to 3 spatial dimensions, channels first, with
// stride, per-side padding, input and kernel dilation and feature groups;
// and max, sum and adaptive windows over arrays of any rank, with the
// max's select-and-scatter gradient.
//
// # Convolution
//
// Params describes a convolution as lax.conv_general_dilated does in NCHW
// layout. Forward computes y = conv(x, w), BackwardInput the transposed
// convolution dx = convᵀ(dy, w) (the forward pass of a ConvTranspose
// layer), BackwardKernel dw. Each picks one of these algorithms:
//
//   - Direct (implicit im2col), for stride 1 without input dilation on the
//     AVX-512 and AVX2 kernel sets. The input is copied into a
//     zero-padded buffer P; output position t then reads tap k of channel
//     c at P[c, q(t) + off(k)], so the column matrix of im2col is P itself,
//     shifted by a per-tap offset (see shift.go). Micro-kernels written
//     for this (gen_kernels.go) take the rows of B as a table of offsets
//     into P: one product of depth C·K per output tile, no column matrix
//     written, and the overlapping taps share cache lines. The input
//     gradient is the same computation on dy with the flipped, transposed
//     kernel. The kernel gradient uses dot-product kernels: dw[o, c, k] is
//     the dot product of dy's plane o with P[c] shifted by off(k), along
//     every output row (no transposes, nothing read past a row); with whole
//     tiles the kernel adds into the partial sums itself.
//     Two layouts of the shifted product: the grid (tiles walk the padded
//     grid into a buffer whose real positions are then copied out) and
//     rows (each output row at least a tile wide is cut into tiles the
//     kernel writes in place, the last one overlapping the one before:
//     no copy, no padding columns computed); a cost model per kernel
//     picks the layout and the tile shape. On the resnet class below,
//     rows raised the forward and input gradient from 210 to 232
//     GFLOP/cpu-s and in-place accumulation the kernel gradient from 169
//     to 193 (go test -run '^$' -bench 'ConvMethod/^resnet$/' ./tensor/internal/conv/,
//     Zen 5 at load 9).
//   - Winograd F(2×2, 3×3) (winograd.go), within the direct form's reach,
//     for the three passes of a 3×3 kernel without dilation or groups
//     whose output has an even number of rows, a multiple of 32 wide (and
//     for the forward pass and input gradient a multiple of 8 channels),
//     on the AVX-512 set: 2.25x fewer multiplications, the transforms in
//     assembly, the forward and input-gradient products on the 8×32 shift
//     kernel, the kernel gradient's (depth: the tiles) on gemm. resnet
//     class below, Intel Sapphire Rapids at load 12-15: forward 122-127 →
//     179-182, input gradient 119-124 → 174-184, kernel gradient 102-105
//     → 138-161 (direct-form) GFLOP/cpu-s. Its values differ from the
//     direct form's by rounding (within a direct sum's bound of the exact
//     result in the tests).
//   - im2col on the gemm kernels (tensor/internal/gemm) for everything
//     else (strides, input dilation, and the portable Go set): column
//     tiles of at most colBudget floats are gathered per group, sample and
//     range of output positions, so the matrix never exists whole and a
//     tile is multiplied while it is in L2; a 1×1 kernel without stride or
//     padding multiplies x as stored.
//
// Measured on a 2-core AMD EPYC (Zen 5, "Turin", AVX-512) VM shared with
// other jobs, in GFLOP per CPU-second, single thread (go test -run '^$'
// -bench ConvMethod ./tensor/internal/conv/; direct/im2col):
//
//	class                              forward     input grad   kernel grad
//	lenet1: 1→6 5×5 pad 2, 28×28, N=128    78/15       38/11        60/9
//	lenet2: 6→16 5×5, 14×14, N=128         84/18       48/18        55/18
//	resnet: 64→64 3×3 pad 1, 32×32, N=32  158/105     146/53        94/75
//	depthwise 64 3×3, 32×32, N=32          11/2        18/2         14/1
//	3-D 16→32 3×3×3, 16³, N=4             119/40      109/38        91/49
//
// against 150-170 for a 64×1024×576 Sgemm in the same runs. A 1-D 64→64
// k=3 convolution on 256 positions ran at 120 in both (the im2col tile
// is small there). Strided convolutions (64→128 3×3 stride 2) run im2col at
// 60-80. Under the portable Go set every class runs im2col at about the
// gemm's 3 GFLOP/s; the per-tap-product and the contiguous-copy forms of the
// shifted convolution measured no better there and were dropped.
//
// # Windows
//
// Window describes lax.reduce_window's windows (size, stride, padding,
// dilation per dimension) or PyTorch's adaptive pooling windows. MaxForward
// returns, with the maxima, each window's arg-max as an index within the
// window (int32, independent of the array's size); MaxBackward routes dy
// to those elements (select-and-scatter), MaxGather is its transpose (the
// second-order term). 2×2 max pools at stride 2 (LeNet's, VGG's) have
// AVX-512 kernels of their own, forward splitting rows into even and odd
// lanes instead of gathering, backward writing each window's four
// elements interleaved back instead of clearing and scattering: LeNet's
// first pool 9.7 → 29-33 GB/cpu-s forward, 5.0 → 35 backward (12-16 in
// quieter minutes), its second 7.8 → 14 and 6.9 → 17 (go test -run '^$'
// -bench 'Window/lenet_pool./max' ./tensor/internal/conv/, Zen 5 at load
// 16-20). SelectScatter is MaxForward then MaxBackward in one pass where
// a kernel does that (the 2×2 pools again): the gradient of a max pool. SumForward and SumBackward
// are a windowed sum and its transpose; Counts gives the divisor of a
// mean without padding.
//
// # Determinism and threads
//
// threads bounds the goroutines a call computes on, as for gemm.Sgemm (1:
// the calling goroutine; 0 or less: GOMAXPROCS); problems under 16 MFLOP
// stay on the calling goroutine. Results have the same bits for every
// thread budget: each output element is computed by the same sequence of
// operations, and the kernel gradient's sum over the batch is cut into a
// number of partial sums that depends on the problem only, added in order.
// Every goroutine a call starts has finished when it returns.
package conv
