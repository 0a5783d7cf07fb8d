//go:build !noasm

package gemm

import "syscall"

// amxPermitted asks Linux for the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which a process must request
// before its first tile instruction, and reports whether it was granted.
// The permission is per process; the kernel then saves the tiles with
// the other vector registers on context switches and signals.
func amxPermitted() bool {
	const archReqXcompPerm, xfeatureXTileData = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0)
	return errno == 0
}
