package tensor

import (
	"fmt"
	"slices"
)

// PixelShuffle rearranges x [..., C·r², H, W] into [..., C, H·r, W·r]:
// element (c·r² + i·r + j, h, w) moves to (c, h·r + i, w·r + j), PyTorch's
// F.pixel_shuffle (sub-pixel convolution's upsampling). It is a reshape
// and a transpose, and differentiates, batches and shards as they do.
func PixelShuffle(x *Tensor, r int) *Tensor {
	checkNil("tensor.PixelShuffle", "x", x)
	k := len(x.shape)
	checkShuffleFactor("tensor.PixelShuffle", x, r)
	if k < 3 || x.shape[k-3]%(r*r) != 0 {
		panic(fmt.Sprintf("tensor.PixelShuffle: %v by %d: want [..., C·%d, H, W]", x, r, r*r))
	}
	if r == 1 {
		return x
	}
	lead := slices.Clone(x.shape[:k-3])
	c, h, w := x.shape[k-3]/(r*r), x.shape[k-2], x.shape[k-1]
	y := Reshape(x, append(slices.Clone(lead), c, r, r, h, w)...)
	b := len(lead)
	perm := make([]int, 0, b+5)
	for i := range b {
		perm = append(perm, i)
	}
	perm = append(perm, b, b+3, b+1, b+4, b+2) // C, H, r, W, r
	return Reshape(Transpose(y, perm...), append(lead, c, h*r, w*r)...)
}

// PixelUnshuffle is PixelShuffle's inverse: x [..., C, H·r, W·r] to
// [..., C·r², H, W], PyTorch's F.pixel_unshuffle.
func PixelUnshuffle(x *Tensor, r int) *Tensor {
	checkNil("tensor.PixelUnshuffle", "x", x)
	k := len(x.shape)
	checkShuffleFactor("tensor.PixelUnshuffle", x, r)
	if k < 3 || x.shape[k-2]%r != 0 || x.shape[k-1]%r != 0 {
		panic(fmt.Sprintf("tensor.PixelUnshuffle: %v by %d: want [..., C, H·%d, W·%d]", x, r, r, r))
	}
	if r == 1 {
		return x
	}
	lead := slices.Clone(x.shape[:k-3])
	c, h, w := x.shape[k-3], x.shape[k-2]/r, x.shape[k-1]/r
	y := Reshape(x, append(slices.Clone(lead), c, h, r, w, r)...)
	b := len(lead)
	perm := make([]int, 0, b+5)
	for i := range b {
		perm = append(perm, i)
	}
	perm = append(perm, b, b+2, b+4, b+1, b+3) // C, r, r, H, W
	return Reshape(Transpose(y, perm...), append(lead, c*r*r, h, w)...)
}

// checkShuffleFactor panics, naming op and x, on a factor below 1.
func checkShuffleFactor(op string, x *Tensor, r int) {
	if r < 1 {
		panic(fmt.Sprintf("%s: %v by %d: the factor must be at least 1", op, x, r))
	}
}
