// Package filekind names the type of a file for error messages, so that
// every package refusing a file that is not a regular one ("not a regular
// file: it is a named pipe (FIFO)") says the same thing.
package filekind

import "io/fs"

// Of names the type of a file of mode m: "a regular file", "a directory",
// "a symlink", "a named pipe (FIFO)", "a socket", "a character device",
// "a device", or "a special file (<mode>)" for any other type.
func Of(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file (" + t.String() + ")"
	}
}
