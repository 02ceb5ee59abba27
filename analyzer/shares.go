package analyzer

// Shares of each byte term in bytes_hbm.
type Shares struct {
	Weights, Activations, KV, Temporary float64
}

// ByteShares is the byte dominance test's input.
func ByteShares(c Cost) Shares {
	h := c.BytesHBM()
	if h == 0 {
		return Shares{}
	}
	return Shares{c.BytesWeights / h, c.BytesActivations / h, c.BytesKV / h, c.BytesTemporary / h}
}

// Dominant names the largest byte term.
func (s Shares) Dominant() string {
	names := []string{"weights", "activations", "kv", "temporary"}
	vals := []float64{s.Weights, s.Activations, s.KV, s.Temporary}
	best := 0
	for i := range vals {
		if vals[i] > vals[best] {
			best = i
		}
	}
	return names[best]
}
