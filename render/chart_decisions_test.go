package render

import "testing"

// Re-binning onto a wider range keeps every count (to rounding) and puts it where its values
// are: a histogram of [0, 1] in 4 bins onto [-1, 1] fills only the upper half.
func TestRebinKeepsCounts(t *testing.T) {
	got := rebin([]int64{10, 20, 30, 40}, 0, 1, -1, 1)
	var sum int64
	for _, c := range got {
		sum += c
	}
	if sum != 100 || got[0] != 0 || got[1] != 0 || got[2] != 30 || got[3] != 70 {
		t.Errorf("rebin: %v (sum %d), want [0 0 30 70]", got, sum)
	}
	if same := rebin([]int64{1, 2}, 0, 1, 0, 1); same[0] != 1 || same[1] != 2 {
		t.Errorf("same range must not change: %v", same)
	}
}

// A chip name from a user's chips file is shown in a plan's markdown, never run as HTML.
func TestMDNameEscapesHTML(t *testing.T) {
	if got := mdName("<script>alert(1)</script>\x1b[31m"); got != `&lt;script&gt;alert(1)&lt;/script&gt;\x1b[31m` {
		t.Errorf("mdName: %q", got)
	}
}
