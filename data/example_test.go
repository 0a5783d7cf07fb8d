package data_test

import (
	"bytes"
	"fmt"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The embedded digits, split reproducibly and standardised with the
// statistics of the training split.
func ExampleDigitsSplit() {
	train, test := data.DigitsSplit(tensor.NewKey(0), 0.2)
	train, test, _ = data.Standardize(train, test)
	fmt.Println(train.X, train.Y, test.X, test.Y)
	fmt.Println(data.Digits().ClassCounts(10))
	// Output:
	// f32[1438,64] i32[1438] f32[359,64] i32[359]
	// [178 182 177 183 181 182 181 179 174 180]
}

// A loader shuffles with a key per epoch: the same epoch always gives the
// same order, the next epoch another one.
func ExampleLoader() {
	ds := data.FromTensors(tensor.Arange(10), nil)
	loader := &data.Loader{Dataset: ds, BatchSize: 4, Shuffle: true, Key: tensor.NewKey(0), Prefetch: 2}
	for epoch := range 2 {
		for b, err := range loader.Epoch(epoch) {
			if err != nil {
				panic(err)
			}
			fmt.Println(epoch, b.Step, b.X.Int32s())
		}
	}
	// Output:
	// 0 0 [0 8 2 4]
	// 0 1 [1 7 9 5]
	// 0 2 [3 6]
	// 1 0 [0 3 9 5]
	// 1 1 [1 8 4 6]
	// 1 2 [2 7]
}

// Leaving the loop early stops the prefetching goroutine; with DropLast
// every batch has the same shape.
func ExampleLoader_dropLast() {
	ds := data.Digits()
	loader := &data.Loader{Dataset: ds, BatchSize: 500, DropLast: true, Prefetch: 1}
	fmt.Println(loader.NumBatches(), "batches")
	for b, err := range loader.Epoch(0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Step, b.X, b.Y)
		if b.Step == 1 {
			break
		}
	}
	// Output:
	// 3 batches
	// 0 f32[500,64] i32[500]
	// 1 f32[500,64] i32[500]
}

// Place puts every batch on a mesh of devices, split along the batch
// dimension (data parallelism), before the training step sees it.
func ExampleLoader_place() {
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	train, _ := data.DigitsSplit(tensor.NewKey(0), 0.2)
	loader := &data.Loader{
		Dataset: train, BatchSize: 64, DropLast: true, Shuffle: true, Key: tensor.NewKey(1), Prefetch: 2,
		Place: func(b data.Batch) (data.Batch, error) {
			return shard.FilterShard(b, mesh, shard.P("dp")), nil
		},
	}
	for b, err := range loader.Epoch(0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.X.Type(), b.Y.Type())
		break
	}
	// Output:
	// float32[64@dp,64] int32[64@dp]
}

// A character-level dataset: inputs and the targets one character later.
func ExampleText() {
	corpus := "to be or not to be"
	vocab := data.NewVocab(corpus)
	ids, err := vocab.Encode(corpus)
	if err != nil {
		panic(err)
	}
	ds := data.NewText(ids, 5, 5)
	b, _ := ds.Batch([]int{0, 2})
	fmt.Println(vocab.Size(), ds.Len(), b.X, b.Y)
	for i := range 2 {
		fmt.Printf("%q -> %q\n", vocab.Decode(b.X.Int32s()[i*5:(i+1)*5]), vocab.Decode(b.Y.Int32s()[i*5:(i+1)*5]))
	}
	// Output:
	// 7 3 i32[2,5] i32[2,5]
	// "to be" -> "o be "
	// "ot to" -> "t to "
}

// IDX files round trip through WriteIDX and ReadIDX; corrupt ones are errors
// that say what is wrong.
func ExampleReadIDX() {
	var buf bytes.Buffer
	if err := data.WriteIDX(&buf, tensor.FromInt32([]int32{0, 128, 255, 7}, 2, 2), data.IDXUint8); err != nil {
		panic(err)
	}
	x, err := data.ReadIDX(bytes.NewReader(buf.Bytes()))
	fmt.Println(x, x.Int32s(), err)

	_, err = data.ReadIDX(bytes.NewReader(buf.Bytes()[:13]))
	fmt.Println(err)
	// Output:
	// i32[2,2] [0 128 255 7] <nil>
	// data: IDX file input: truncated: shape [2 2] of 0x08 (u8) needs 4 bytes of data, only 1 follow the header
}
