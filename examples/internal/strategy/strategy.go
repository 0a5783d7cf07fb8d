// Package strategy holds what the examples that train on parallel.Trainer
// with the strategies of parallel.Strategies (single, dp, fsdp, tp,
// fsdp_tp) share about choosing one: checking the -strategy and -mesh
// flags, the size of the device pool, the default mesh of a strategy, and
// the batch sizes a mesh can split.
//
// Every error a mistake in a flag or an environment variable causes is a
// cli.UsageError naming the flag or the variable.
package strategy

import (
	"fmt"
	"strings"

	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// Compare is the -strategy value that runs one step of every strategy
// side by side instead of training.
const Compare = "compare"

// IsCompare reports whether the -strategy value s asks for the side-by-side
// comparison (in any case).
func IsCompare(s string) bool { return strings.EqualFold(s, Compare) }

// Flags registers the flags -strategy (default single) and -mesh on f,
// parsed into strategy and mesh, and adds CheckFlags of them to f's
// checks (after those added before).
func Flags(f *cli.Flags, strategy, mesh *string) {
	f.String(strategy, "strategy", "single", "single, dp, fsdp, tp, fsdp_tp, or compare (one step of each, side by side)")
	f.String(mesh, "mesh", "", `device mesh, e.g. "dp=8" or "dp=4,tp=2" (default: dp=8, or dp=4,tp=2 for tp and fsdp_tp)`)
	f.Check(func() error { return CheckFlags(*strategy, *mesh) })
}

// CheckFlags checks the -strategy and -mesh flags before any work: the
// strategy is compare or one parallel.ParseStrategy knows, a -mesh is
// not given with the single strategy, and a -mesh parses. It is meant for
// cli.Flags.Check; the error names the flag.
func CheckFlags(strategy, mesh string) error {
	if !IsCompare(strategy) {
		if _, err := parallel.ParseStrategy(strategy); err != nil {
			return fmt.Errorf("-strategy: %v", err)
		}
		if mesh != "" && strings.EqualFold(strategy, "single") {
			return fmt.Errorf("-mesh %q: -strategy single trains on one device; choose dp, fsdp, tp or fsdp_tp to use a mesh", mesh)
		}
	}
	if mesh != "" {
		if _, err := shard.ParseMesh(mesh); err != nil {
			return fmt.Errorf("-mesh %q: %v", mesh, err)
		}
	}
	return nil
}

// Devices returns the number of devices of the pool the meshes are made
// of: $GONOX_DEVICES (shard.DevicesFromEnv; a bad value is a usage
// error), or under mpirun the devices of every process.
func Devices() (int, error) {
	n, err := shard.DevicesFromEnv()
	if err != nil {
		return 0, cli.Usage(err)
	}
	if shard.ProcessCount() > 1 {
		// Under mpirun $GONOX_DEVICES counts one process's devices; the
		// meshes take theirs from the whole pool.
		n = len(shard.Devices())
	}
	return n, nil
}

// Mesh returns the mesh strategy s trains on: the -mesh flag's mesh (flag,
// if not empty), or by default every one of the n devices of the pool on
// "dp", or half of them with "tp" of 2 for the tensor-parallel strategies
// (tp and fsdp_tp). Single has no mesh (nil). A mesh that does not parse
// or has more devices than the pool is a usage error naming -mesh or the
// default mesh.
func Mesh(flag string, s parallel.Strategy, n int) (*shard.Mesh, error) {
	if s == parallel.Single {
		return nil, nil
	}
	desc := flag
	if desc == "" {
		desc = fmt.Sprintf("dp=%d", n)
		if s == parallel.TP || s == parallel.FSDPTP {
			desc = fmt.Sprintf("dp=%d,tp=2", max(n/2, 1))
		}
	}
	what := fmt.Sprintf("-mesh %q", desc)
	if flag == "" {
		what = fmt.Sprintf("the default mesh %q of strategy %v", desc, s)
	}
	m, err := shard.ParseMesh(desc)
	if err != nil {
		return nil, cli.Usagef("%s: %v", what, err)
	}
	if m.Size() < 1 || m.Size() > n {
		return nil, cli.Usagef("%s: %d devices; the pool has %d (set %s)", what, m.Size(), n, shard.DevicesEnv)
	}
	return m, nil
}

// Where names the devices mesh m is: "one device" for none (the single
// strategy), else the mesh as shard.Mesh.String prints it.
func Where(m *shard.Mesh) string {
	if m == nil {
		return "one device"
	}
	return m.String()
}

// CheckBatch returns a usage error naming -batch if the devices of the
// data axes of tr's mesh do not divide a batch of the given size, and nil
// on one device or without data axes.
func CheckBatch[M, B any](batch int, tr *parallel.Trainer[M, B]) error {
	if tr.Mesh() == nil || len(tr.DataAxes()) == 0 {
		return nil
	}
	if n := tr.Mesh().AxisSize(tr.DataAxes()...); batch%n != 0 {
		return cli.Usagef("-batch %d is not divisible by the %d devices of the data axes %v of %v", batch, n, tr.DataAxes(), tr.Mesh())
	}
	return nil
}
