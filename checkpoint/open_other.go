//go:build !unix

package checkpoint

// oNonblock: no FIFOs to guard against here.
const oNonblock = 0
