package parallel

// FoldSmall makes the DP step fold weight gradients of any size (the
// tests' models are small; see foldMinPart) until restore is called.
func FoldSmall() (restore func()) {
	old := foldMinPart
	foldMinPart = 0
	return func() { foldMinPart = old }
}

// CopyUpdatedBlocks makes the sharded update write its updated blocks to
// fresh storage, copied into the all-gathers' results (the step before
// lendGather), until restore is called.
func CopyUpdatedBlocks() (restore func()) {
	lendGather = false
	return func() { lendGather = true }
}

// UpdateAfterFolds makes the sharded update wait for every folded
// gradient before updating (the step before foldUpdate), until restore
// is called.
func UpdateAfterFolds() (restore func()) {
	foldUpdate = false
	return func() { foldUpdate = true }
}

// TracePhases makes each device of the sharded step call f when it has
// done its forward and backward passes (phase 0), waited for its
// gradients but those the update consumes (1), updated (2) and
// all-gathered the parameters (3), until restore is called.
func TracePhases(f func(phase int)) (restore func()) {
	stepPhases = f
	return func() { stepPhases = nil }
}

// LaterUpdates returns the number of folded gradients the sharded update
// has consumed block by block (updateLater) since the process started.
func LaterUpdates() int64 { return laterUpdates.Load() }

// FreshState makes the sharded update write the new optimizer state to
// fresh storage, not over the old state's (overState), until restore is
// called.
func FreshState() (restore func()) {
	overState = false
	return func() { overState = true }
}

// UpdateAfterBackward makes the host step update the parameters after
// the backward pass (the step before updateInBackward), until restore is
// called.
func UpdateAfterBackward() (restore func()) {
	updateInBackward = false
	return func() { updateInBackward = true }
}

// BackwardSteps returns the number of host steps that updated the
// parameters during the backward pass since the process started.
func BackwardSteps() int64 { return backwardSteps.Load() }

// UpdateAfterReductions makes the sharded update wait for every
// reduction before updating when no gradient is folded (the step before
// laterReductions), until restore is called.
func UpdateAfterReductions() (restore func()) {
	laterReductions = false
	return func() { laterReductions = true }
}

// LaterReductions returns the number of reductions the sharded update
// has taken as they arrived (updateLater) since the process started.
func LaterReductions() int64 { return laterReduced.Load() }

// ReduceEachLeaf makes the sharded update reduce-scatter each split
// gradient on its own (the step before groupReductions), until restore
// is called.
func ReduceEachLeaf() (restore func()) {
	groupReductions = false
	return func() { groupReductions = true }
}

// LaterGrouped returns the number of reductions the sharded update has
// taken from a group (startGroups) since the process started.
func LaterGrouped() int64 { return laterGrouped.Load() }

// GatherEachLeaf makes the sharded update take an all-gather for each
// split leaf (the step before groupGathers), until restore is called.
func GatherEachLeaf() (restore func()) {
	groupGathers = false
	return func() { groupGathers = true }
}

// GatheredGrouped returns the number of blocks the sharded update has
// gathered in lent groups since the process started.
func GatheredGrouped() int64 { return gatheredGrouped.Load() }

// StepLeavesOneByOne makes the host step that updates in the backward pass
// step every leaf on its own as its gradient becomes final (the step
// before groupSmallLeaves), until restore is called.
func StepLeavesOneByOne() (restore func()) {
	groupSmallLeaves = false
	return func() { groupSmallLeaves = true }
}

// ConcatBucket makes the sharded step lay the small gradients of its one
// psum end to end with tensor.Concat (the step before copyBucket), until
// restore is called.
func ConcatBucket() (restore func()) {
	copyBucket = false
	return func() { copyBucket = true }
}

// BucketsCopied returns the number of buckets the sharded step has laid
// out by copying its members since the process started.
func BucketsCopied() int64 { return bucketCopied.Load() }

// UnsharedForward makes the DP step compute each device's forward
// products alone (the step before shareForward), until restore is called.
func UnsharedForward() (restore func()) {
	old := shareForward
	shareForward = false
	return func() { shareForward = old }
}
