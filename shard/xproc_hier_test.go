package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHierarchicalSumOrder: the hierarchical sum (each host's, then the
// hosts') adds in sumFloat32's order over every process exactly for the
// layouts whose trees align, and hostRuns finds the hosts' runs.
func TestHierarchicalSumOrder(t *testing.T) {
	for _, tc := range []struct {
		sizes []int // processes per host
		same  bool
	}{
		{[]int{2, 2}, true},
		{[]int{4, 4}, true},
		{[]int{2, 2, 2}, true},
		{[]int{2, 2, 2, 2}, true},
		{[]int{8, 8}, true},
		{[]int{4, 4, 4, 4}, true},
		{[]int{3, 3}, false},
		{[]int{2, 1}, true}, // (0+1)+2 either way
		{[]int{1, 2}, false},
		{[]int{4, 2}, true}, // (0+1)+(2+3) then +(4+5): sumFloat32's groups of 4 and 2
		{[]int{2, 4}, false},
	} {
		t.Run(fmt.Sprint(tc.sizes), func(t *testing.T) {
			parts := make([]*sumTree, len(tc.sizes))
			total := 0
			for i, s := range tc.sizes {
				parts[i] = sumOrder(leaves(s))
				total += s
			}
			assert.Equal(t, tc.same, sameSum(sumOrder(parts), sumOrder(leaves(total))))
		})
	}
	// Hosts by lowest rank: 0 0 2 2 4 4.
	hosts := []int{0, 0, 2, 2, 4, 4}
	assert.Equal(t, [][]int{{0, 1}, {2, 3}, {4, 5}}, hostRuns(hosts, []int{0, 1, 2, 3, 4, 5}))
	assert.Equal(t, [][]int{{1}, {2, 3}}, hostRuns(hosts, []int{1, 2, 3}))
	assert.Nil(t, hostRuns(hosts, []int{0, 2, 4}), "one process per host")
	assert.Nil(t, hostRuns(hosts, []int{0, 1}), "one host")
	assert.Nil(t, hostRuns([]int{0, 1, 0, 1}, []int{0, 1, 2, 3}), "a host's processes not consecutive")
}
