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
