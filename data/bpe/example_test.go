package bpe_test

import (
	"fmt"
	"path/filepath"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/data/bpe"
)

func ExampleLoad() {
	tok, err := bpe.Load(filepath.Join("testdata", "gpt2-encoder.json.gz"), filepath.Join("testdata", "gpt2-vocab.bpe.gz"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("Light is refracted.")
	fmt.Println(tok.Size(), ids)
	for _, id := range ids {
		fmt.Printf("%q,", tok.Token(id))
	}
	fmt.Printf("\n%s\n", tok.Decode(ids))
	// Output:
	// 50257 [15047 318 1006 20216 13]
	// "Light"," is"," ref","racted",".",
	// Light is refracted.
}

func ExampleTrain() {
	tok := bpe.Train(data.Opticks(), 2000)
	ids := tok.Encode("The Rays of Light are refracted.")
	for _, id := range ids {
		fmt.Printf("%q,", tok.Token(id))
	}
	fmt.Println()
	fmt.Println(tok.Size(), tok.NumMerges())
	// Output:
	// "The"," Rays"," of"," Light"," are"," refracted",".",
	// 2000 1743
}

func ExampleWords() {
	bpe.Words([]byte("He said: 'tis 42°,  isn't it?"), func(w []byte) bool {
		fmt.Printf("%q,", w)
		return true
	})
	fmt.Println()
	// Output:
	// "He"," said",":"," '","tis"," 42","°,"," "," isn","'t"," it","?",
}
