package gemm

import "fmt"

func ExampleSgemm() {
	// C = A·Bᵀ with A 2×3 and B stored 2×3 (so op(B) = Bᵀ is 3×2).
	a := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	b := []float32{
		1, 0, 1,
		0, 1, 0,
	}
	c := make([]float32, 2*2)
	Sgemm(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2, 1)
	fmt.Println(c)
	// Output: [4 2 10 5]
}

func ExampleDgemm() {
	// C = 2·Aᵀ·B + C with A stored 2×3 (so op(A) = Aᵀ is 3×2) and B 2×2.
	a := []float64{
		1, 2, 3,
		4, 5, 6,
	}
	b := []float64{
		1, 0,
		0, 1,
	}
	c := []float64{
		1, 1,
		1, 1,
		1, 1,
	}
	Dgemm(true, false, 3, 2, 2, 2, a, 3, b, 2, 1, c, 2, 1)
	fmt.Println(c)
	// Output: [3 9 5 11 7 13]
}
