package chips

// IdleFrac is the share of TDP an accelerator draws with no kernel running: a stated default
// (an idle 700 W H100 SXM reads 60–100 W in nvidia-smi, an idle 1000 W B200 about 140 W).
const IdleFrac = 0.12

// Power is a chip's draw in a node: an idle floor, a part that grows with the time its
// kernels run, and the node's non-GPU share.
type Power struct {
	TDPW  float64 `json:"tdp_w"`
	IdleW float64 `json:"idle_w"`
	// NodeOverheadW per GPU: the node's published maximum less its GPUs' TDPs, shared out;
	// 0 when no system of the chip names its power.
	NodeOverheadW float64 `json:"node_overhead_w"`
	Source        string  `json:"source"`
}

// PowerOf is the chip's power model: TDP from the chip, the idle floor at IdleFrac of it,
// and the node overhead from the first system built of the chip that publishes its power.
func (db *DB) PowerOf(c Chip) Power {
	p := Power{TDPW: c.TDPW, IdleW: IdleFrac * c.TDPW, Source: "chip TDP; idle at 12% of TDP (stated default)"}
	for _, s := range db.systems {
		if key(s.Chip) != key(c.Name) || s.MaxPowerKW <= 0 || s.GPUsPerNode < 1 {
			continue
		}
		if over := (s.MaxPowerKW*1000 - float64(s.GPUsPerNode)*c.TDPW) / float64(s.GPUsPerNode); over > 0 {
			p.NodeOverheadW = over
			p.Source += "; node overhead from " + s.Name + "'s published maximum power"
		}
		break
	}
	return p
}

// Watts is the draw per GPU, node share included, when kernels run busy of the time (0–1).
func (p Power) Watts(busy float64) float64 {
	busy = min(max(busy, 0), 1)
	return p.IdleW + (p.TDPW-p.IdleW)*busy + p.NodeOverheadW
}
