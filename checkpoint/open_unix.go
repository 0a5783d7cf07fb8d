//go:build unix

package checkpoint

import "syscall"

// oNonblock makes opening a FIFO return at once instead of waiting for a
// writer; on regular files it changes nothing.
const oNonblock = syscall.O_NONBLOCK
