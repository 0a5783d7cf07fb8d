// Package devices records whether device goroutines of shard.Map are
// running. Package shard reports them; package tensor asks, for kernels
// that have no operand to carry a device mark (the random samplers): while
// devices run, every core already computes a device's block, so such
// kernels stay on the calling goroutine instead of fanning out.
//
// The count is process-wide: a sampler called outside shard.Map, on
// another goroutine, while a Map runs also stays on its goroutine. That
// costs speed, never results (samplers compute each element from its
// index alone).
package devices

import "sync/atomic"

var running atomic.Int64

// Enter records that n device goroutines start; Exit(n) that they ended.
func Enter(n int) { running.Add(int64(n)) }

// Exit records that n device goroutines ended.
func Exit(n int) { running.Add(-int64(n)) }

// Running reports whether any device goroutine is running.
func Running() bool { return running.Load() > 0 }
