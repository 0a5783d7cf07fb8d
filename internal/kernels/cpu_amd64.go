//go:build !noasm

package kernels

import "golang.org/x/sys/cpu"

// best returns the widest set this CPU and OS run. AVX-512 needs only the
// F subset (the gemm kernels use zmm FMA, broadcasts and mask registers)
// plus BMI2, which every AVX-512 CPU has; AVX2 needs FMA as well.
func best() Set {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasBMI2 && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return AVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX:
		return AVX2
	}
	return Go
}

// describe says why set s cannot run here.
func describe(s Set) string {
	switch s {
	case AVX512:
		return "this CPU has no AVX-512F"
	case AVX2:
		return "this CPU has no AVX2 with FMA"
	}
	return "not available"
}
