package data_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/tensor"
)

// A text stream tokenised into a token file, then read back as windows
// for a next-token model, in shuffled batches by a resumable Stream.
func ExampleWriteTokens() {
	dir, _ := os.MkdirTemp("", "tokens")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "opticks.tok")

	vocab := data.NewVocab(data.Opticks())
	n, err := data.WriteTokens(path, strings.NewReader(data.Opticks()), vocab)
	if err != nil {
		fmt.Println(err)
		return
	}
	windows, err := data.OpenTokenWindows([]string{path}, 64, 64) // disjoint windows of 64
	if err != nil {
		fmt.Println(err)
		return
	}
	defer windows.Close()
	fmt.Println(n, "tokens,", windows.Len(), "windows, vocabulary", windows.Vocab())

	s := &data.Stream{Dataset: windows, BatchSize: 16, Shuffle: true, Key: tensor.NewKey(0), Prefetch: 2}
	r := s.Open(context.Background(), 0)
	defer r.Close()
	b, err := r.Next()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.X, b.Y, "epoch", b.Epoch, "step", b.Step, "next position", r.Position())
	// Output:
	// 567038 tokens, 8859 windows, vocabulary 91
	// i32[16,64] i32[16,64] epoch 0 step 0 next position 1
}

// Resuming mid-epoch: a Reader opened at the position saved with a
// checkpoint gives the batches an uninterrupted run gives, here with the
// work shared by two processes (each reading half of every batch).
func ExampleStream_resume() {
	ds := data.FromTensors(tensor.Reshape(tensor.AsType(tensor.Arange(20), tensor.Float32), 10, 2), tensor.Arange(10))
	s := data.Stream{Dataset: ds, BatchSize: 4, Shuffle: true, Key: tensor.NewKey(1)}

	r := s.Open(context.Background(), 0)
	for range 3 {
		b, _ := r.Next()
		fmt.Println("uninterrupted", b.Epoch, b.Step, b.Indices)
	}
	r.Close()

	for p := range 2 {
		share := s
		share.Share = data.Share{Index: p, Count: 2}
		r := share.Open(context.Background(), 1) // the saved position
		for range 2 {
			b, _ := r.Next()
			fmt.Println("process", p, b.Epoch, b.Step, b.Indices)
		}
		r.Close()
	}
	// Output:
	// uninterrupted 0 0 [7 3 1 2]
	// uninterrupted 0 1 [9 6 4 8]
	// uninterrupted 1 0 [1 6 8 2]
	// process 0 0 1 [9 6]
	// process 0 1 0 [1 6]
	// process 1 0 1 [4 8]
	// process 1 1 0 [8 2]
}

// Augmentation for an image loader: each example cropped and flipped with
// a key of its own (from the loader's Key, the epoch and its index), then
// normalised.
func ExampleAugmentations() {
	images := data.FromTensors(tensor.Uniform(tensor.NewKey(2), 100, 8, 8, 3), tensor.Zeros(tensor.Int32, 100))
	loader := &data.Loader{
		Dataset: images, BatchSize: 25, Shuffle: true, Key: tensor.NewKey(3),
		Augment: data.Augmentations{
			data.RandomCrop{Padding: 2},
			data.HorizontalFlip{},
			data.NormalizeChannels{Mean: []float32{0.5, 0.5, 0.5}, Std: []float32{0.29, 0.29, 0.29}},
		},
	}
	for b, err := range loader.Epoch(0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(b.X)
	}
	// Output:
	// f32[25,8,8,3]
	// f32[25,8,8,3]
	// f32[25,8,8,3]
	// f32[25,8,8,3]
}

// An image dataset larger than memory: CreateImages writes labelled images
// one record at a time (in bounded memory, renamed into place by Close),
// OpenImages maps the file, and a Loader (or a Stream) reads only the
// records of each batch. Batches are channels last, X f32[B,H,W,C] in
// [0,1]; nn.Conv wants channels first, so transpose them for a CNN. A
// label beyond the classes, a truncated file or one with trailing bytes is
// an error (*data.FileError) naming the file and the byte offset.
func ExampleCreateImages() {
	dir, _ := os.MkdirTemp("", "images")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "train.img")

	w, err := data.CreateImages(path, data.Uint8, 4, 4, 1, 10) // 4×4 grey images, 10 classes
	if err != nil {
		fmt.Println(err)
		return
	}
	pixels := make([]uint8, 4*4)
	for i := range 100 {
		for j := range pixels {
			pixels[j] = uint8(i + j)
		}
		if err := w.WriteUint8(i%10, pixels); err != nil {
			w.Discard()
			fmt.Println(err)
			return
		}
	}
	if err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	images, err := data.OpenImages(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer images.Close()
	h, wd, c := images.Shape()
	fmt.Println(images.Len(), "images", h, "×", wd, "×", c, "in", images.Classes(), "classes")

	loader := &data.Loader{Dataset: images, BatchSize: 32, Shuffle: true, Key: tensor.NewKey(0), DropLast: true}
	for b, err := range loader.Epoch(0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		x := tensor.Transpose(b.X, 0, 3, 1, 2) // [B, C, H, W] for nn.Conv
		fmt.Println(b.X, "->", x, b.Y)
	}
	// Output:
	// 100 images 4 × 4 × 1 in 10 classes
	// f32[32,4,4,1] -> f32[32,1,4,4] i32[32]
	// f32[32,4,4,1] -> f32[32,1,4,4] i32[32]
	// f32[32,4,4,1] -> f32[32,1,4,4] i32[32]
}
