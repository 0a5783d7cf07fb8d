package shard

// PrefetchesTaken returns how many gathers on m were served from
// Prefetch so far (0 on a mesh of one process).
func PrefetchesTaken(m *Mesh) int {
	if m.net == nil {
		return 0
	}
	m.net.pf.mu.Lock()
	defer m.net.pf.mu.Unlock()
	return m.net.pf.taken
}
