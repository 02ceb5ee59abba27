package chips

import (
	"errors"
	"strings"
	"testing"
)

// A flag's price overrides the database's, found by alias; the database's comes with its source
// and month; a chip neither prices has none.
func TestPricesFor(t *testing.T) {
	db := Default()
	p, err := ParsePrices(db, []string{"H100=2", " MI300X = 1.5 "})
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := db.Lookup("H100")
	h200, _ := db.Lookup("H200")
	if usd, src := p.For(h100); usd != 2 || src != "--price" {
		t.Errorf("H100: $%g from %q, want $2 from --price", usd, src)
	}
	if usd, src := p.For(h200); usd != h200.PriceUSDPerGPUHour || usd <= 0 || !strings.HasPrefix(src, h200.PriceSource) || !strings.HasSuffix(src, "("+h200.PriceDate+")") {
		t.Errorf("H200: $%g from %q, want the database's with its date", usd, src)
	}
	// a zero price on the command line is a price (free), not "unknown"
	free, err := ParsePrices(db, []string{"H200=0"})
	if err != nil {
		t.Fatal(err)
	}
	if usd, src := free.For(h200); usd != 0 || src != "--price" {
		t.Errorf("H200=0: $%g from %q", usd, src)
	}
	var none Chip
	none.Name = "unpriced"
	if usd, src := p.For(none); usd != 0 || src != "" {
		t.Errorf("unpriced chip: $%g from %q", usd, src)
	}
}

// Bad values are refused with a message that quotes the flag value as given.
func TestParsePricesRefuses(t *testing.T) {
	db := Default()
	for _, bad := range []string{"Z80=1", "H100=cheap", "H100", "H100=", "H100=-1", "H100=NaN", "H100=Inf", "H100=-Inf", "H100=1e400"} {
		_, err := ParsePrices(db, []string{"H200=4", bad})
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if want := `--price "` + bad + `"`; !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q does not name the value", bad, err)
		}
	}
	if _, err := ParsePrices(db, []string{"Z80=1"}); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown chip: %v, want ErrUnknown", err)
	}
}
