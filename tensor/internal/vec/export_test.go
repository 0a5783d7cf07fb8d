package vec

// setAsm switches the assembly kernels on (if the machine has them) or
// off, returning a function that restores the previous state.
func setAsm(on bool) func() {
	old := useAVX2
	useAVX2 = on && hasAVX2()
	return func() { useAVX2 = old }
}

var avx2Available = useAVX2

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
