package parallel

import (
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The DP and EP steps with a sharded update (ZeRO-1/2, Rajbhandari et al.
// 2020).
//
// With replicated parameters and an elementwise optimizer
// (optim.Elementwise lists them: SGD, the Adam family, Adagrad, Adadelta,
// Lion... without a Mask) the Map step
// of each device
//
//	computes its gradient of every parameter from its rows (no reduction),
//	reduce-scatters it over the data axes (psum_scatter) along the
//	  dimension zeroSpec picks (the first one the number of data devices
//	  divides; a leaf without one, such as a bias of 10 classes, is
//	  all-reduced and updated whole on every device),
//	updates its block of the parameter with its block of the optimizer
//	  state, which is stored split over the data axes like that block,
//	all-gathers the updated blocks into the replicated parameter.
//
// Parameters the strategy splits over some of the data axes and keeps
// split while the loss runs (EP's experts over "ep": every mesh axis is a
// data axis under EP) are treated the same way over the data axes they
// are not split over (dp): their blocks' gradients are reduce-scattered
// over those, along a dimension of the block they divide, and each device
// updates its part (splitFurther; a block no such dimension divides is
// all-reduced and updated whole on its devices). Without this, every
// device would run the update of every parameter it holds (8 full Adam
// updates of the replicated parameters a step on 8 devices, and dp of
// each expert's).
//
// The reduce-scatter and the all-gather move the bytes of the one
// all-reduce of plain DP; the update's work and the optimizer state are
// divided by the number of data devices. The state keeps the tree of
// optim.Transform.Init(params) (State and SetState, and checkpoints, see
// the same leaves as before, only placed split). Each leaf is split where
// it lies rather than laid end to end into one flat vector as
// optim.ZeRO does: flattening would copy the gradients and the parameters
// into the flat vector every step, and the blocks of a leaf split along
// its first dimension are contiguous already.
//
// Other optimizers (masks see whole leaves, global-norm clipping inside a
// Chain would need a psum, Adafactor keeps row and column statistics) keep
// the host update: the gradients are all-reduced, gathered and the
// replicated state is updated once on the host. Config.ClipGlobalNorm is
// handled on the sharded step: its norm sums the squares of the blocks
// over the data axes (optim.GlobalNorm with the device's psum).

// zeroWholeMax is the size, in elements, up to which a vector parameter
// (a bias, a norm's scale) is left whole by the sharded update, as if no
// dimension could be split (zeroWhole); it also bounds the bucket of
// gradients summed in one psum (gradBucket), which shard then stages in
// one process (it sums psums of up to 4096 float32 elements at one
// meeting).
const zeroWholeMax = 4096

// zeroWhole reports whether the sharded update leaves parameter x whole: a
// vector of at most zeroWholeMax elements. Its gradient is all-reduced
// with the other small ones and the loss in one psum (gradBucket), and
// every device updates all of it. Split, it would cost a reduce-scatter
// and an all-gather, each a meeting of the devices, to save each device
// the update of a few thousand elements.
func zeroWhole(x *tensor.Tensor) bool {
	return x.Rank() <= 1 && x.Size() <= zeroWholeMax
}

// planZeRO records, by parameter path, the dimension of each parameter
// that the sharded update splits over the data axes, and returns where the
// optimizer state of each parameter is stored: split like those blocks. A
// parameter the strategy splits already over some of the data axes (EP's
// experts over "ep") is split further over the others (dp) along a
// dimension its block divides: its gradient is reduce-scattered over
// those, each device updates its part of the block and holds that part of
// the state, and the parts are all-gathered back into the block (before,
// every device along dp updated the whole block: twice the experts' Adam
// on a dp=2 mesh). Without such a dimension it is left whole: its
// gradient is all-reduced over the other data axes, and its state is
// placed like it.
func (t *Trainer[M, B]) planZeRO(model M) pathSpecs {
	n := t.mesh.AxisSize(t.dataAxes...)
	paths, leaves := pytree.LeavesWithPath(model)
	specs := make(pathSpecs, len(leaves))
	t.zeroDims = make(map[string]int, len(leaves))
	t.zeroSums = make(map[string][]string, len(leaves))
	t.zeroPlan.own = make([]bool, len(leaves))
	for i, x := range leaves {
		key := paths[i].String()
		dim, spec := -1, t.specs[key]
		split := spec.Axes()
		sums := slices.DeleteFunc(slices.Clone(t.dataAxes), func(a string) bool { return slices.Contains(split, a) })
		if x.DType().IsFloat() && !zeroWhole(x) {
			if len(split) == 0 {
				spec = zeroSpec(x.Shape(), nil, t.dataAxes, n)
			} else if len(sums) > 0 {
				spec = splitFurther(t.mesh, x.Shape(), spec, sums)
			}
			for d, ds := range spec {
				if len(sums) > 0 && slices.Contains(ds, sums[0]) {
					dim = d
				}
			}
		}
		t.zeroDims[key] = dim
		t.zeroSums[key] = sums
		specs[key] = spec
		// A split leaf's state lies on one device alone when its blocks
		// are split over every axis of the mesh (stateDead).
		t.zeroPlan.own[i] = dim >= 0 && t.mesh.AxisSize(spec.Axes()...) == t.mesh.Size()
	}
	t.zeroPlan.dims, t.zeroPlan.sums = t.leafPlansByPath(model)
	return specs
}

// splitFurther adds the axes sums (of total size more than one) to spec,
// minor to the axes already there, on the first dimension of shape whose
// block under spec they divide, and returns spec unchanged if none does:
// each device's part of its block along sums is then a block of the
// result.
func splitFurther(mesh *shard.Mesh, shape []int, spec shard.Spec, sums []string) shard.Spec {
	n := mesh.AxisSize(sums...)
	if n <= 1 {
		return spec
	}
	for d, size := range shape {
		var ds shard.DimSpec
		if d < len(spec) {
			ds = spec[d]
		}
		if len(ds) > 0 {
			size /= mesh.AxisSize(ds...)
		}
		if size >= n && size%n == 0 {
			out := make(shard.Spec, len(shape))
			copy(out, spec)
			out[d] = shard.DimSpec(slices.Concat(ds, sums))
			return out
		}
	}
	return spec
}

// leafPlans returns the split dimension of each leaf of the parameters,
// in pytree.Flatten's order (-1 for a leaf left whole), and the axes each
// leaf is reduced over: all the data axes, but those a parameter the
// strategy splits already is split over. The step's parameters have the
// model's structure: the plan is planZeRO's, computed once (by path, it
// cost every device a walk and a path string per leaf every step).
// Callers only read the slices.
func (t *Trainer[M, B]) leafPlans() ([]int, [][]string) {
	return t.zeroPlan.dims, t.zeroPlan.sums
}

// leafPlansByPath is leafPlans for tree, looked up by path.
func (t *Trainer[M, B]) leafPlansByPath(tree M) ([]int, [][]string) {
	paths, _ := pytree.LeavesWithPath(tree)
	dims := make([]int, len(paths))
	sums := make([][]string, len(paths))
	for i, p := range paths {
		dim, ok := t.zeroDims[p.String()]
		sum := t.zeroSums[p.String()]
		if !ok {
			dim, sum = -1, t.dataAxes
		}
		dims[i], sums[i] = dim, sum
	}
	return dims, sums
}

// zeroStep is one device's training step with the sharded update.
func (t *Trainer[M, B]) zeroStep(c *shard.Ctx, in stepIn[M, B]) stepOut[M] {
	axes := t.dataAxes
	// Differentiate with respect to per-device copies of the parameters:
	// the gradients come out unreduced, for the reduce-scatter below (and
	// micro-batches accumulate on the device, one reduction per step).
	dims, sums := t.leafPlans()
	pv, folds := t.varyingParams(c, in.Params, dims, sums)
	// Each split gradient's reduce-scatter starts as soon as the backward
	// pass has finished it (autodiff.OnGradient), and travels while the
	// gradients of the layers before it are computed (PyTorch DDP's
	// buckets; each leaf is one bucket here, reduced where it lies). The
	// leaves left whole (biases: small) are all-reduced after the
	// backward pass, so that a started exchange never waits behind one
	// that shard defers (an all-reduce between processes would spin while
	// the device computes; see shard.Ctx.PsumStart).
	hs := make([]*shard.Handle, len(dims))
	reduce := func(i int, x *tensor.Tensor) *shard.Handle {
		if dims[i] < 0 {
			return c.PsumStart(x, sums[i]...)
		}
		if rd := t.cfg.ReduceDType; rd != 0 && x.DType() == tensor.Float32 {
			x = tensor.AsType(x, rd) // Config.ReduceDType: half the bytes
		}
		return c.PsumScatterStart(x, sums[i], dims[i], true)
	}
	// Grouped (groupedReductions): the split float32 gradients are
	// reduce-scattered together after the backward pass, not one by one
	// as the backward pass finishes each.
	grouped := folds == nil && t.groupedReductions(c, dims, sums)
	var opts []autodiff.Option
	var start func(i int, x *tensor.Tensor)
	if !t.cfg.ReduceAfterBackward {
		start = func(i int, x *tensor.Tensor) {
			if x.DType().IsFloat() && dims[i] >= 0 && !(grouped && x.DType() == tensor.Float32) {
				hs[i] = reduce(i, x)
			}
		}
		opts = append(opts, autodiff.OnGradient(start))
	}
	var l, rows *tensor.Tensor // rows: the device's loss, summed over the data axes after the backward pass
	var g M
	n := c.AxisSize(axes...)
	flow := newFlow(in.ModelState, t.cfg.StateLoss != nil)
	switch k := t.cfg.MicroBatches; {
	case k == 1 && len(axes) > 0 && localDevices(t.mesh) <= runtime.GOMAXPROCS(0):
		// The loss of the device's rows is differentiated scaled by 1/n,
		// as Pmean scales its sum (the same cotangents, bit for bit), and
		// summed over the devices after the backward pass, with the
		// gradients: a Pmean inside the loss would make every device
		// wait for the slowest one's forward pass before its backward
		// pass could start. Not when this process has more devices than
		// cores: there the Pmean makes the devices sharing a core run
		// their forward passes one after the other, reading the same
		// weights, before any backward pass writes its gradients (a DP
		// step of the 784-1024-1024-10 MLP on 8 devices and 2 cores took
		// 4-7% more CPU time without it, on 2 devices 2-4% less).
		var scaled *tensor.Tensor
		scaled, rows, g = valueAndGradAux(pv, func(p M) (*tensor.Tensor, *tensor.Tensor) {
			x := t.rowsLoss(c, p, in.Batch, in.Key, 0, flow)
			return meanScale(x, n), x
		}, opts...)
		tensor.Donate(scaled)
		rows = tensor.StopGradient(rows) // the auxiliary output's value
	case k == 1:
		l, g = valueAndGrad(pv, func(p M) *tensor.Tensor { return t.deviceLoss(c, p, in.Batch, in.Key, 0, flow) }, opts...)
	default:
		// The gradients are final during the last micro-batch's backward
		// pass: each starts its reduction there, with its average.
		l, g = accumulateThen(k, pv, in.Batch, func(p M, mb B, i int) *tensor.Tensor { return t.deviceLoss(c, p, mb, in.Key, i, flow) }, start)
	}
	markPhase(phaseBackward)
	// The varying copies of the parameters are headers of their own over
	// the parameters' storage: drop them, so that the storage can be
	// recycled once the trainer donates the old parameters.
	donateDead(in.Params, pv)
	leaves, tree := gradLeaves(in.Params, g)
	// The loss and the small gradients left whole meet in one psum,
	// started before the reduce-scatters are waited for.
	bucket, mean := t.startBucket(c, leaves, hs, dims, sums, rows)
	// The folded gradients first, last leaf first: in the order the
	// backward pass started them (a model's layers last to first), so
	// that a device computes its parts of the last layers' gradients while
	// another still runs the rest of its backward pass. Those the update
	// takes later (laterFolds) are left to it.
	later := t.laterFolds(c, folds, leaves, dims, sums, bucket)
	if grouped {
		if later == nil {
			panic("parallel: the sharded update could not take the grouped reductions later") // groupedReductions checked
		}
		later.startGroups(c, leaves, dims, sums)
	}
	for i := len(leaves) - 1; i >= 0 && folds != nil; i-- {
		if x := leaves[i]; folds[i] != nil && (later == nil || later.folds[i] == nil) {
			leaves[i] = foldedGradient(folds[i], hs[i], func() *shard.Handle { return reduce(i, x) })
			donateValue(x) // the rest of the cotangent, reduced (nil if there was none)
		}
	}
	waitReductions(leaves, folds, hs, bucket, later, reduce)
	g = pytree.Unflatten[M](tree, leaves)
	markPhase(phaseReduced)
	p, st := t.zeroUpdate(c, in.Params, g, in.State, dims, sums, later)
	if mean >= 0 {
		l = meanScale(bucket.wait(mean), n)
	} else if rows != nil {
		l = meanScale(c.Psum(rows, axes...), n)
	}
	// Keep each parameter's logical axes, as the host update does. The
	// all-gathered blocks are this step's own: the named headers alone hold
	// them.
	p = pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return namedFresh(xs[0], xs[1]) }, p, in.Params)
	return stepOut[M]{Params: p, State: st, Loss: l, ModelState: t.replicatedState(c, flow)}
}

// waitReductions replaces each float gradient in leaves (but the folded
// ones) by its reduction: the bucket's (the small leaves and the loss),
// its started handle's (hs[i]; reduce starts one not started during the
// backward pass) or, where the update takes it later, nil, the reduction
// handed to later instead. A gradient reduced into fresh storage is
// donated.
func waitReductions(leaves []*tensor.Tensor, folds []*shard.FoldedGradient, hs []*shard.Handle, bucket *gradBucket, later *laterGrads, reduce func(int, *tensor.Tensor) *shard.Handle) {
	for i, x := range leaves {
		if x == nil || !x.DType().IsFloat() || folds != nil && folds[i] != nil {
			continue
		}
		if j := slices.Index(bucket.leaves, i); j >= 0 {
			if later != nil {
				// Taken after the folds: waiting for the bucket here
				// would wait for every device's whole backward pass
				// before this one computes its folds.
				later.member[i] = j
				leaves[i] = nil
				continue
			}
			leaves[i] = bucket.wait(j)
			continue // the bucket's copy of x is reduced, x is the caller's
		}
		if later != nil && later.grp[i] >= 0 {
			later.rest[i] = x // reduced in its group (startGroups)
			leaves[i] = nil
			continue
		}
		h := hs[i]
		if h == nil { // not started during the backward pass
			h = reduce(i, x)
		}
		if later != nil && x.DType() == tensor.Float32 {
			// Taken after the folds too: a reduction meets the other
			// devices once they have all reached it.
			later.hs[i], later.rest[i] = h, x
			leaves[i] = nil
			continue
		}
		leaves[i] = h.Wait()
		if leaves[i].DType() != x.DType() { // reduced in Config.ReduceDType
			leaves[i] = tensor.AsType(leaves[i], x.DType())
		}
		// The device's full-size gradient is dead once reduced (every
		// device is past the reduction's barrier): its storage serves the
		// next step's gradient instead of fresh memory. A leaf split over
		// every data axis (reduced by the loss's own collectives) is its
		// gradient already.
		if leaves[i] != x {
			donateValue(x)
		}
	}
}

// The phases of a device's sharded step that markPhase reports.
const (
	phaseBackward = iota // forward and backward passes done (folded gradients not computed)
	phaseReduced         // every gradient waited for but those the update consumes (laterFolds)
	phaseUpdated         // the update done, every fold computed
	phaseGathered        // the parameters all-gathered
)

// stepPhases, if not nil, hears each device of the sharded step reach each
// phase (markPhase): the timeline of BenchmarkDPStep/devices=N/timeline.
// A variable for the benchmark; nil otherwise.
var stepPhases func(phase int)

// markPhase reports phase to stepPhases, if set.
func markPhase(phase int) {
	if stepPhases != nil {
		stepPhases(phase)
	}
}

// foldMinPart is the number of elements of a device's part of a weight
// gradient from which the DP step folds it (Config.UnfoldedGradients):
// below, the parts' products are small gemms that run at a fraction of
// the gemm's speed, and the whole gradients are small enough to write and
// sum. examples/moe's dp_ep (128×128 weights over 8 devices: parts of
// 16×128) ran at 21.0-21.4 K chars per CPU-second folded against
// 22.1-22.6 K unfolded; the DP benchmark's 784×1024 and 1024×1024 weights
// (parts of 98×1024 and more) fold with 11% less CPU on 8 devices.
// A variable for the tests, which fold small models.
var foldMinPart = 1 << 15

// shareForward makes the folded weights' forward products of few rows a
// device computed by the devices together (shard.FoldedGradient.ShareForward:
// the DP step of the MLP 784-1024-1024-10 on 8 devices of 32 rows). A
// variable for the tests and the benchmark, which compare the step with
// and without.
var shareForward = true

// varyingParams returns the device's varying copies of the parameters,
// which the step differentiates, and the folded gradients
// (shard.Ctx.FoldPsumScatter) of the split float32 matrices among them,
// by leaf (nil when none is folded, see Config.UnfoldedGradients). A
// matrix whose parts would be small (foldMinPart) or whose storage
// another leaf shares (tied weights: a product's cotangent could not tell
// which leaf it belongs to) is not folded.
func (t *Trainer[M, B]) varyingParams(c *shard.Ctx, params M, dims []int, sums [][]string) (M, []*shard.FoldedGradient) {
	leaves, st := pytree.Flatten(params)
	fold := !t.cfg.UnfoldedGradients && !t.cfg.ReduceAfterBackward && t.cfg.MicroBatches == 1 && t.cfg.ReduceDType == 0 &&
		c.AxisSize(t.dataAxes...) > 1 // over one device there is nothing to reduce
	var folds []*shard.FoldedGradient
	shared := map[*float32]int{}
	if fold {
		for _, x := range leaves {
			if x != nil && x.DType() == tensor.Float32 && x.Size() > 0 {
				shared[&x.BorrowFloat32()[0]]++
			}
		}
	}
	for i, x := range leaves {
		if x == nil || !x.DType().IsFloat() {
			continue
		}
		leaves[i] = c.Vary(x, t.dataAxes...)
		if fold && dims[i] >= 0 && len(sums[i]) == len(t.dataAxes) && x.DType() == tensor.Float32 && x.Rank() == 2 &&
			x.Size()/c.AxisSize(t.dataAxes...) >= foldMinPart && shared[&x.BorrowFloat32()[0]] == 1 {
			if folds == nil {
				folds = make([]*shard.FoldedGradient, len(leaves))
			}
			folds[i] = c.FoldPsumScatter(leaves[i], t.dataAxes, dims[i])
			if shareForward {
				folds[i].ShareForward() // the parameter is replicated: the same on every device
			}
		}
	}
	return pytree.Unflatten[M](st, leaves), folds
}

// laterGrads are the gradients the sharded update takes as they arrive
// (updateLater), by leaf: the folds it consumes block by block as they
// compute them, then the other float32 gradients' reductions (hs, with
// the device's gradients they reduce, rest) and the members of the bucket
// (member: -1 for a leaf not taken from it), each of which meets every
// device, and so waits for the slowest one's backward pass.
type laterGrads struct {
	folds  []*shard.FoldedGradient
	hs     []*shard.Handle // the other gradients' reductions, by leaf
	rest   []*tensor.Tensor
	bucket *gradBucket
	member []int
	// The grouped reductions (startGroups): each leaf's group (-1 for a
	// leaf in none) and the offset of its part in the group's result.
	grp, off []int
	groups   []reductionGroup
}

// reductionGroup is one reduce-scatter of several leaves' gradients over
// the same axes (shard.Ctx.PsumScatterGroupStart): its handle, and its
// result once waited for.
type reductionGroup struct {
	h    *shard.Handle
	flat *tensor.Tensor
}

// startGroups starts, for each set of axes in sums, one reduce-scatter of
// the split float32 gradients among leaves reduced over it
// (shard.Ctx.PsumScatterGroupStart), in leaf order, and records each
// leaf's group and the offset of its part.
func (l *laterGrads) startGroups(c *shard.Ctx, leaves []*tensor.Tensor, dims []int, sums [][]string) {
	var xs []*tensor.Tensor
	var ds []int
	for i, x := range leaves {
		if x == nil || dims[i] < 0 || x.DType() != tensor.Float32 || l.grp[i] >= 0 {
			continue
		}
		g, at := len(l.groups), 0
		xs, ds = xs[:0], ds[:0]
		for j := i; j < len(leaves); j++ {
			y := leaves[j]
			if y == nil || dims[j] < 0 || y.DType() != tensor.Float32 || l.grp[j] >= 0 || !slices.Equal(sums[j], sums[i]) {
				continue
			}
			l.grp[j], l.off[j] = g, at
			at += y.Size() / c.AxisSize(sums[j]...)
			xs, ds = append(xs, y), append(ds, dims[j])
		}
		l.groups = append(l.groups, reductionGroup{h: c.PsumScatterGroupStart(xs, sums[i], ds)})
	}
}

// part returns leaf i's part of its group's reduce-scatter, n elements,
// waiting for the group on its first part.
func (l *laterGrads) part(i, n int) []float32 {
	g := &l.groups[l.grp[i]]
	if g.flat == nil {
		g.flat = g.h.Wait()
	}
	return g.flat.BorrowFloat32()[l.off[i] : l.off[i]+n : l.off[i]+n]
}

// takes reports whether the update takes leaf i's gradient later.
func (l *laterGrads) takes(i int) bool {
	return l.folds[i] != nil || l.hs[i] != nil || l.member[i] >= 0 || l.grp[i] >= 0
}

// laterFolds returns the gradients the sharded update takes later
// (laterGrads), or nil if there are none: the folded gradients whose fold
// took one product and whose backward pass returned nothing else
// (leaves[i] nil), when the update writes into the all-gathers' results
// over the old state (stateDead) and the optimizer can take gradients
// later; then also the other float32 gradients, which zeroStep marks.
// With no fold at all (every part too small to fold, as in examples/moe's
// dp_ep), the update still takes the float32 reductions as they arrive
// when the step could have folded (laterReductions): each leaf is updated
// right after its wait, while the sum is in cache, last leaf first. An
// optimizer that needs every gradient first (Config.ClipGlobalNorm's
// global norm, a Chain, a Mask) cannot: its gradients are waited for in
// zeroStep.
func (t *Trainer[M, B]) laterFolds(c *shard.Ctx, folds []*shard.FoldedGradient, leaves []*tensor.Tensor, dims []int, sums [][]string, bucket *gradBucket) *laterGrads {
	if !foldUpdate || !lendGather || !optim.TakesGradientsLater(t.optimizer(c.Psum)) {
		return nil
	}
	if folds == nil {
		if !laterReductions || t.cfg.ReduceAfterBackward || t.cfg.MicroBatches != 1 || t.cfg.ReduceDType != 0 ||
			c.AxisSize(t.dataAxes...) == 1 || !t.stateDead(c, dims, sums) {
			return nil
		}
		return newLaterGrads(len(leaves), bucket)
	}
	if !t.stateDead(c, dims, sums) {
		return nil
	}
	var later *laterGrads
	for i, f := range folds {
		if f != nil && f.Folded() == 1 && leaves[i] == nil {
			if later == nil {
				later = newLaterGrads(len(folds), bucket)
			}
			later.folds[i] = f
		}
	}
	return later
}

// newLaterGrads returns the laterGrads of n leaves, none taken yet.
func newLaterGrads(n int, bucket *gradBucket) *laterGrads {
	later := &laterGrads{folds: make([]*shard.FoldedGradient, n), hs: make([]*shard.Handle, n),
		rest: make([]*tensor.Tensor, n), bucket: bucket, member: make([]int, n), grp: make([]int, n), off: make([]int, n)}
	for j := range later.member {
		later.member[j], later.grp[j] = -1, -1
	}
	return later
}

// groupedReductions reports whether the sharded update reduce-scatters
// the split float32 gradients in groups after the backward pass, one
// shard.Ctx.PsumScatterGroupStart for the leaves reduced over the same
// axes, rather than each as the backward pass finishes it: when it takes
// the reductions later without folds (laterFolds, whose conditions it
// repeats before the backward pass) and every device of the mesh is in
// this process. In one process a started reduce-scatter only posts its
// call during the backward pass, and the devices sum when they wait for
// it after the pass: the group sums the same parts in the same order,
// at one meeting of the devices and into one result, instead of one of
// each a leaf (examples/moe's dp_ep: ~40 split leaves on 8 devices).
// Between processes the exchanges travel during the backward pass
// instead, one by one.
func (t *Trainer[M, B]) groupedReductions(c *shard.Ctx, dims []int, sums [][]string) bool {
	return groupReductions && foldUpdate && lendGather && laterReductions && !t.cfg.ReduceAfterBackward &&
		t.cfg.MicroBatches == 1 && t.cfg.ReduceDType == 0 && c.AxisSize(t.dataAxes...) > 1 &&
		localDevices(t.mesh) == t.mesh.Size() && optim.TakesGradientsLater(t.optimizer(c.Psum)) && t.stateDead(c, dims, sums)
}

// groupReductions makes the sharded update group its reduce-scatters
// where groupedReductions allows it. A variable for the tests, which
// compare the step with and without.
var groupReductions = true

// laterReductions makes the sharded update take the reductions as they
// arrive when no gradient is folded (laterFolds). A variable for the
// tests, which compare the step with and without.
var laterReductions = true

// foldUpdate makes the sharded update consume the folded gradients as
// they are computed (laterFolds). A variable for the tests and the
// benchmark, which compare the step with and without.
var foldUpdate = true

// gradLeaves returns the leaves of the gradient tree g of params, in
// pytree.Flatten's order of params, and the structure to rebuild it: the
// backward pass leaves the position of a folded leaf empty (nil) when
// its products' cotangents were all it had, and Flatten(g) would skip it.
func gradLeaves[M any](params, g M) ([]*tensor.Tensor, pytree.Structure) {
	leaves, tree := pytree.Flatten(g)
	full, ptree := pytree.Flatten(params)
	if len(leaves) == len(full) {
		return leaves, tree
	}
	paths, _ := pytree.LeavesWithPath(params)
	gpaths, gl := pytree.LeavesWithPath(g)
	at := make(map[string]int, len(paths))
	for i, p := range paths {
		at[p.String()] = i
	}
	out := make([]*tensor.Tensor, len(full))
	for j, p := range gpaths {
		out[at[p.String()]] = gl[j]
	}
	return out, ptree
}

// foldedGradient returns the reduce-scattered gradient of a folded leaf:
// the parts f took from the products, plus the reduce-scatter h of what
// the backward pass still returned for the leaf (its other uses; h is
// nil when it returned nil, and autodiff.OnGradient then did not start
// it). A leaf no product used (whose gradient is zeros) is reduced as
// unfolded (reduce).
func foldedGradient(f *shard.FoldedGradient, h *shard.Handle, reduce func() *shard.Handle) *tensor.Tensor {
	part := f.Wait()
	if h == nil && part == nil {
		h = reduce()
	}
	if h == nil {
		return part
	}
	rest := h.Wait()
	if part == nil {
		return rest
	}
	sum := tensor.Add(part, rest)
	tensor.Donate(part, rest)
	return sum
}

// zeroUpdate updates the device's block of every split parameter with its
// reduce-scattered gradient g (the leaves left whole in full) and
// all-gathers the updated blocks: the replicated parameters, without
// their logical axes, and the optimizer state. dims and sums are
// leafPlans's.
//
// Each split parameter's all-gather is taken before the update
// (shard.Ctx.AllGatherInvariantTarget), and the optimizer writes the
// device's updated block straight into the gathered result where the
// gather lends it (optim.StepInto: Adam and its variants): no copy of the
// updated blocks into the replicated parameters. When the old state is
// the step's to give up (stateDead), the new moments are written over the
// old ones too (optim.StepIntoOverState).
func (t *Trainer[M, B]) zeroUpdate(c *shard.Ctx, params, g M, state optim.State, dims []int, sums [][]string, later *laterGrads) (M, optim.State) {
	leaves, tree := pytree.Flatten(params)
	for i, x := range leaves {
		if x != nil && dims[i] >= 0 {
			leaves[i] = ownBlock(c, x, dims[i], sums[i])
		}
	}
	gs := takeTargets(c, leaves, dims, sums)
	dst := make([]*tensor.Tensor, len(leaves))
	lent := false
	if lendGather {
		for i := range leaves {
			dst[i] = gs.block(i)
			lent = lent || dst[i] != nil
		}
	}
	own := pytree.Unflatten[M](tree, leaves)
	var st optim.State
	switch {
	case later != nil:
		own, st = t.updateLater(c, pytree.Unflatten[M](tree, dst), own, g, state, later)
	case lent && t.stateDead(c, dims, sums):
		own, st = optim.StepIntoOverState(pytree.Unflatten[M](tree, dst), t.optimizer(c.Psum), own, g, state)
	case lent:
		own, st = optim.StepInto(pytree.Unflatten[M](tree, dst), t.optimizer(c.Psum), own, g, state)
	default:
		own, st = optim.Step(t.optimizer(c.Psum), own, g, state)
	}
	// The reduce-scattered blocks are dead after the update, unless the new
	// state or parameters hold one of them as it is.
	donateDead([]any{st, own}, g)
	// Every updated block is all-gathered, all started before any is
	// waited for: in one process the devices then meet once for all of
	// them rather than once each.
	markPhase(phaseUpdated)
	pl, pt := pytree.Flatten(own)
	// The updated blocks are dead once gathered (an all-gather has read
	// every operand when it returns); the leaves left whole are the
	// parameters themselves.
	parts := make([]*tensor.Tensor, len(pl))
	for i, x := range pl {
		if dims[i] >= 0 {
			parts[i] = x
		}
	}
	gs.gather(pl)
	markPhase(phaseGathered)
	p := pytree.Unflatten[M](pt, pl)
	donateDead(st, parts)
	return p, st
}

// gathers are the all-gathers of the sharded update's blocks, taken
// before the update: in one process, a shard.GatherTargets for the float32
// blocks gathered over the same axes that lie contiguous in their results
// (groupGathers: one slot and one meeting of the devices for all of them),
// a shard.GatherTarget for each other split leaf. By leaf: its target, or
// its group and its index in it (-1 for none).
type gathers struct {
	targets []*shard.GatherTarget
	grp, at []int
	groups  []*shard.GatherTargets
}

// takeTargets takes the all-gathers of blocks (the device's parts of the
// split leaves, by leaf: dims[i] >= 0), over sums, in leaf order; a group
// takes its place at its first leaf.
func takeTargets(c *shard.Ctx, blocks []*tensor.Tensor, dims []int, sums [][]string) *gathers {
	n := len(blocks)
	g := &gathers{targets: make([]*shard.GatherTarget, n), grp: make([]int, n), at: make([]int, n)}
	for i := range g.grp {
		g.grp[i] = -1
	}
	grouped := func(i int) bool {
		x := blocks[i]
		return groupGathers && x.DType() == tensor.Float32 && !slices.ContainsFunc(x.BorrowShape()[:dims[i]], func(d int) bool { return d != 1 })
	}
	for i, x := range blocks {
		switch {
		case x == nil || dims[i] < 0 || g.grp[i] >= 0:
		case !grouped(i):
			g.targets[i] = c.AllGatherInvariantTarget(x.DType(), x.Shape(), sums[i], dims[i], true)
		default:
			var shapes [][]int
			var ds []int
			for j := i; j < n; j++ {
				if y := blocks[j]; y != nil && dims[j] >= 0 && g.grp[j] < 0 && grouped(j) && slices.Equal(sums[j], sums[i]) {
					g.grp[j], g.at[j] = len(g.groups), len(shapes)
					shapes, ds = append(shapes, y.Shape()), append(ds, dims[j])
				}
			}
			g.groups = append(g.groups, c.AllGatherInvariantTargets(shapes, sums[i], ds))
		}
	}
	return g
}

// block returns leaf i's lent block of its all-gather's result, or nil.
func (g *gathers) block(i int) *tensor.Tensor {
	if t := g.targets[i]; t != nil {
		return t.Block()
	}
	if k := g.grp[i]; k >= 0 {
		return g.groups[k].Block(g.at[i])
	}
	return nil
}

// gather starts every all-gather with the updated blocks (by leaf) before
// waiting for any, and replaces each block with its gathered parameter.
func (g *gathers) gather(blocks []*tensor.Tensor) {
	hs := make([]*shard.Handle, len(blocks))
	for i, x := range blocks {
		if g.targets[i] != nil {
			hs[i] = g.targets[i].Start(x)
		}
	}
	xs := make([][]*tensor.Tensor, len(g.groups))
	for i, k := range g.grp {
		if k >= 0 {
			xs[k] = append(xs[k], blocks[i])
		}
	}
	for k, t := range g.groups {
		t.Start(xs[k])
		if t.Block(0) != nil {
			gatheredGrouped.Add(int64(len(xs[k])))
		}
	}
	for i, h := range hs {
		if h != nil {
			blocks[i] = h.Wait()
		}
	}
	for k, t := range g.groups {
		xs[k] = t.Wait()
	}
	for i, k := range g.grp {
		if k >= 0 {
			blocks[i] = xs[k][g.at[i]]
		}
	}
}

// groupGathers makes the sharded update take its all-gathers in groups
// (takeTargets). A variable for the tests, which compare the step with
// and without.
var groupGathers = true

// gatheredGrouped counts the blocks the sharded update gathered in a
// group that was lent its blocks (one meeting for the group), for the
// tests.
var gatheredGrouped atomic.Int64

// updateLater is the sharded update of zeroUpdate where the gradients
// later has are taken as they arrive: the other leaves are updated first
// (optim.StepIntoOverStateLater), then each fold, last leaf first (the
// order the backward pass started them), hands its part to its leaf's
// step block by block (shard.FoldedGradient.WaitThen), so that the
// gradient is read while in cache and the update's memory traffic runs
// between the products rather than after them all; then the other
// gradients' reductions and the bucket's members (biases), which meet
// the other devices.
func (t *Trainer[M, B]) updateLater(c *shard.Ctx, dst, own, g M, state optim.State, later *laterGrads) (M, optim.State) {
	leaves, tree := pytree.Flatten(own)
	marks := make([]*tensor.Tensor, len(leaves))
	var at []int // the leaves with a later gradient, in order
	for i := range leaves {
		if later.takes(i) {
			marks[i] = leaves[i]
			at = append(at, i)
		}
	}
	p, st, steps, ok := optim.StepIntoOverStateLater(dst, t.optimizer(c.Psum), own, g, pytree.Unflatten[M](tree, marks), state)
	if !ok || len(steps) != len(at) {
		panic("parallel: the sharded update could not take the gradients later") // laterFolds checked
	}
	for j := len(at) - 1; j >= 0; j-- {
		f, step := later.folds[at[j]], steps[j]
		if f == nil {
			continue
		}
		if f.WaitThen(step) {
			laterUpdates.Add(1)
			continue
		}
		// Computed whole (a mesh spanning processes): one piece.
		part := f.Wait()
		step(0, part.BorrowFloat32())
		donateValue(part)
	}
	// The other reductions last leaf first, in the order the backward
	// pass started them: the first waited for is the first the other
	// devices could have sent.
	for j := len(at) - 1; j >= 0; j-- {
		i := at[j]
		if later.grp[i] >= 0 {
			steps[j](0, later.part(i, leaves[i].Size()))
			laterReduced.Add(1)
			laterGrouped.Add(1)
			continue
		}
		if h := later.hs[i]; h != nil {
			r := h.Wait()
			laterReduced.Add(1)
			steps[j](0, r.BorrowFloat32())
			donateValue(r)
			if x := later.rest[i]; r != x {
				donateValue(x) // the device's own gradient, reduced
			}
		}
	}
	// The groups' results and the device's gradients they reduced are
	// dead once every part is stepped.
	for _, g := range later.groups {
		donateValue(g.flat)
	}
	for i, g := range later.grp {
		if g >= 0 {
			donateValue(later.rest[i])
		}
	}
	for j, i := range at {
		if m := later.member[i]; m >= 0 {
			steps[j](0, later.bucket.part(m))
		}
	}
	return p, st
}

// laterUpdates counts the folded gradients the sharded update consumed
// block by block (updateLater), laterReduced the other reductions it took
// as they arrived, for the tests.
var laterUpdates, laterReduced atomic.Int64

// laterGrouped counts the reductions the sharded update took from a
// group (startGroups), for the tests.
var laterGrouped atomic.Int64

// stateDead reports whether the sharded update may write the new
// optimizer state over the old one (optim.StepIntoOverState): the step
// donates the old state after it (the user has not been handed it, see
// donation), and every split leaf's block lies on this device alone (it is
// split over every device of the mesh, over the data axes or over those
// and the axes the strategy splits the parameter over, as EP's experts on
// a dp×ep mesh: no other device reads the block of a state replicated
// over other axes). The new moments then take the old
// ones' storage instead of streaming into fresh buffers, which matters
// where the devices' updates share the memory bandwidth (the DP step of
// the 784-1024-1024-10 MLP with Adam on 2 devices: see
// docs/performance.md).
func (t *Trainer[M, B]) stateDead(c *shard.Ctx, dims []int, sums [][]string) bool {
	if !donateSteps || !t.don.state || !overState {
		return false
	}
	for i, d := range dims {
		if d >= 0 && !t.zeroPlan.own[i] {
			return false
		}
	}
	return true
}

// overState makes the sharded update write the new optimizer state over
// the old one where stateDead allows it. A variable for the tests and the
// benchmark, which compare the step with and without.
var overState = true

// lendGather makes the sharded update write the updated blocks into the
// all-gathers' results (zeroUpdate). A variable for the tests, which
// compare the step with and without.
var lendGather = true

// ownBlock returns this device's part along axes of block x, split along
// dim: the part of the parameter it updates.
func ownBlock(c *shard.Ctx, x *tensor.Tensor, dim int, axes []string) *tensor.Tensor {
	n, r := c.AxisSize(axes...), c.AxisIndex(axes...)
	s := x.Dim(dim) / n
	if dim == 0 && x.DType() == tensor.Float32 {
		// The rows of a replicated block are contiguous: a view of them,
		// read (not written) by the update, saves copying 1/n of the
		// parameters per device.
		per := x.Size() / x.Dim(0)
		shape := x.Shape()
		shape[0] = s
		// Borrowed: the replicated block outlives this step's update, so
		// the storage may be recycled only later. It varies over the axes
		// x does (EP's experts over ep).
		v := tensor.WrapFloat32(x.BorrowFloat32()[r*s*per:(r+1)*s*per:(r+1)*s*per], shape...)
		if l := x.Local(); l != nil {
			return tensor.Vary(v, l)
		}
		return c.Local(v)
	}
	return tensor.SliceAxis(x, dim, r*s, (r+1)*s)
}

// meanScale divides a sum over n devices by n as shard.Ctx.Pmean does
// (the same op, for the same bits): Pmean(x) is meanScale(Psum(x), n).
func meanScale(x *tensor.Tensor, n int) *tensor.Tensor {
	if x.DType() == tensor.Float64 {
		return tensor.Div(x, tensor.ScalarFloat64(float64(n)))
	}
	return tensor.MulScalar(x, 1/float32(n))
}

// localDevices returns the number of mesh's devices in this process.
func localDevices(mesh *shard.Mesh) int {
	n := 0
	for _, d := range mesh.Devices() {
		if d.IsLocal() {
			n++
		}
	}
	return n
}

// gradBucket is the one psum, over the data axes, of the small gradients
// the sharded update leaves whole (zeroWholeMax) and of the device's
// loss: their blocks flattened and laid end to end, then cut apart.
// Summed elementwise in the same order of devices, each comes out with
// the bits of its own psum.
type gradBucket struct {
	leaves []int            // the leaves in the bucket, in its order
	parts  []*tensor.Tensor // the bucket's members (the leaves', then the loss)
	h      *shard.Handle
	sum    *tensor.Tensor
}

// startBucket starts the bucket's psum: the float32 gradients among
// leaves updated whole and summed over every data axis, and rows (the
// device's loss, if not nil), as long as they fit zeroWholeMax in all. It
// returns the bucket and the loss's member index (-1 if it is not in the
// bucket). With fewer than two members there is nothing to put together:
// the bucket is empty and each is summed alone.
func (t *Trainer[M, B]) startBucket(c *shard.Ctx, leaves []*tensor.Tensor, hs []*shard.Handle, dims []int, sums [][]string, rows *tensor.Tensor) (*gradBucket, int) {
	b := &gradBucket{}
	total := 0
	add := func(x *tensor.Tensor) bool {
		if x.DType() != tensor.Float32 || total+x.Size() > zeroWholeMax {
			return false
		}
		b.parts = append(b.parts, x)
		total += x.Size()
		return true
	}
	for i, x := range leaves {
		if x != nil && dims[i] < 0 && hs[i] == nil && slices.Equal(sums[i], t.dataAxes) && add(x) {
			b.leaves = append(b.leaves, i)
		}
	}
	mean := -1
	if rows != nil && add(rows) {
		mean = len(b.parts) - 1
	}
	if len(b.parts) < 2 {
		return &gradBucket{}, -1
	}
	b.h = c.PsumStart(b.concat(total), t.dataAxes...)
	return b, mean
}

// concat returns the bucket's members flattened and laid end to end, total
// elements: copied into storage from the allocator cache when they all
// vary over the same axes (their elements, as tensor.Concat of their
// reshapes would have them, without a reshape header a member and the
// op's dispatch on every device), else by tensor.Concat.
func (b *gradBucket) concat(total int) *tensor.Tensor {
	l := b.parts[0].Local()
	if !copyBucket || l == nil || slices.ContainsFunc(b.parts, func(x *tensor.Tensor) bool { return x.Local() != l || x.IsTraced() }) {
		flat := make([]*tensor.Tensor, len(b.parts))
		for i, x := range b.parts {
			flat[i] = tensor.Reshape(x, x.Size())
		}
		return tensor.Concat(0, flat...)
	}
	out := tensor.Empty(tensor.Float32, total)
	dst, at := out.BorrowFloat32(), 0
	for _, x := range b.parts {
		at += copy(dst[at:], x.BorrowFloat32())
	}
	bucketCopied.Add(1)
	return tensor.Vary(out, l)
}

// copyBucket makes gradBucket.concat copy the members itself where it
// can. A variable for the tests, which compare the step with and without.
var copyBucket = true

// bucketCopied counts the buckets gradBucket.concat copied itself, for
// the tests.
var bucketCopied atomic.Int64

// wait returns the sum of the bucket's member j, waiting for the psum.
func (b *gradBucket) wait(j int) *tensor.Tensor {
	off, n := b.at(j)
	return tensor.Reshape(tensor.SliceAxis(b.sum, 0, off, off+n), b.parts[j].Shape()...)
}

// part returns the elements of the sum of the bucket's member j, waiting
// for the psum: for a reader of the elements, without wait's headers.
func (b *gradBucket) part(j int) []float32 {
	off, n := b.at(j)
	return b.sum.BorrowFloat32()[off : off+n : off+n]
}

// at waits for the psum and returns the offset and size of member j in
// its sum.
func (b *gradBucket) at(j int) (off, n int) {
	if b.sum == nil {
		b.sum = b.h.Wait()
	}
	for _, x := range b.parts[:j] {
		off += x.Size()
	}
	return off, b.parts[j].Size()
}
