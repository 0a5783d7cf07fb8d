package vec

// setAsm switches the assembly kernels on (if the machine has them) or
// off, returning a function that restores the previous state.
func setAsm(on bool) func() {
	old, old512 := useAVX2, useAVX512
	useAVX2, useAVX512 = on && hasAVX2(), on && avx512Available
	return func() { useAVX2, useAVX512 = old, old512 }
}

// setAVX512 switches the AVX-512 kernels on (if the machine has them) or
// off, leaving the AVX2 ones as they are.
func setAVX512(on bool) func() {
	old := useAVX512
	useAVX512 = on && avx512Available
	return func() { useAVX512 = old }
}

var avx2Available, avx512Available = useAVX2, useAVX512

func hasAVX2() bool { return avx2Available }

func asmModes() []bool {
	if hasAVX2() {
		return []bool{false, true}
	}
	return []bool{false}
}

func asmName(asm bool) string {
	if asm {
		return "/asm"
	}
	return ""
}
