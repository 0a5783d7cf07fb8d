package cli

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/optim"
)

// This file holds the Settings and the parts of a run's record that
// several examples' checkpoints share.

// Unchecked is the Setting of a record field that may change without a
// note, such as the name a dataset was given (the same files elsewhere),
// when another field identifies its contents.
func Unchecked(flag string) Setting {
	return Setting{Flag: flag, Changed: func(checkpoint.Difference) string { return "" }}
}

// Placement is the Setting of where a run trains (its strategy and mesh,
// as "dp on Mesh('dp': 8)"): it may change, with a note that the state is
// resharded.
func Placement() Setting {
	return Setting{Flag: "-strategy", Changed: func(d checkpoint.Difference) string {
		return fmt.Sprintf("(saved under %v; the state is resharded for %v)", d.Saved, d.Current)
	}}
}

// Length is the Setting of the length of a run (flag "-epochs" or
// "-steps", counted in unit "epochs" or "steps") resumed after done units:
// it may change; a length of done or fewer leaves none to train, with a
// note saying so, and a longer one goes on, with the note longer(was,
// now), the saved and the current lengths.
func Length(flag, unit string, done int, longer func(was, now int) string) Setting {
	return Setting{Flag: flag, Changed: func(d checkpoint.Difference) string {
		was, now := d.Saved.(int), d.Current.(int)
		if now <= done {
			return fmt.Sprintf("(%s %d: the checkpoint has %d %s done already, so none is left to train)", flag, now, done, unit)
		}
		return longer(was, now)
	}}
}

// Steps is the Length of -steps of a run resumed after done steps whose
// learning-rate schedule spans the run (schedule(n) is the one of a run of
// n steps): a longer run notes the rate at step done on the new schedule
// and on the saved one.
func Steps(done int, schedule func(steps int) optim.Schedule) Setting {
	return Length("-steps", "steps", done, func(was, now int) string {
		return fmt.Sprintf("(-steps %d: the checkpoint's run was of %d steps, so the learning-rate schedule now decays over %d: at step %d the rate is %.3g where it would have been %.3g)",
			now, was, now, done, schedule(now)(done), schedule(was)(done))
	})
}

// DataDigest identifies in-memory datasets by their contents: the first
// 16 hex digits of a SHA-256 of each one's shapes, features (float32) and
// labels (int32), little-endian, in order.
func DataDigest(sets ...*data.InMemory) string {
	h := sha256.New()
	for _, d := range sets {
		fmt.Fprintf(h, "%v %v;", d.X.Shape(), d.Y.Shape())
		hashChunks(h, d.X.Float32s())
		hashChunks(h, d.Y.Int32s())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// hashChunks writes xs to w little-endian, 64 Ki elements at a time.
func hashChunks[T float32 | int32](w io.Writer, xs []T) {
	for lo := 0; lo < len(xs); lo += 1 << 16 {
		binary.Write(w, binary.LittleEndian, xs[lo:min(lo+1<<16, len(xs))])
	}
}
