package units

import "testing"

func TestFormats(t *testing.T) {
	cases := []struct{ got, want string }{
		{SI(1.3e12, "B"), "1.30 TB"}, {SI(999, "FLOP"), "999.00 FLOP"}, {SI(481.25e12, "FLOP"), "481.25 TFLOP"},
		{IEC(1023), "1023 B"}, {IEC(1 << 30), "1.00 GiB"}, {IEC(671026404352), "624.94 GiB"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
