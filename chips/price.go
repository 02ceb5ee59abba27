package chips

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Prices are per-GPU-hour prices in US dollars given on the command line (--price CHIP=USD),
// by the database's name of the chip; they override the database's own prices.
type Prices map[string]float64

// PriceFlag is the source a price given on the command line is shown with.
const PriceFlag = "--price"

// ParsePrices reads --price CHIP=USD values: the chip must be one the database knows (by name
// or alias, so H100=2 prices H100-SXM), the price a finite non-negative number of dollars per
// GPU-hour. Errors quote the flag value as given.
func ParsePrices(db *DB, flags []string) (Prices, error) {
	prices := Prices{}
	for _, p := range flags {
		name, val, ok := strings.Cut(p, "=")
		v, perr := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || perr != nil || !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s %q: want CHIP=USD per GPU-hour, e.g. H100=2.5", PriceFlag, p)
		}
		chip, err := db.Lookup(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", PriceFlag, p, err)
		}
		prices[chip.Name] = v
	}
	return prices, nil
}

// For is chip's price per GPU-hour and where it comes from: the flag's, else the database's with
// its source and month; 0 and "" when neither knows one (no cost is then shown).
func (p Prices) For(chip Chip) (usd float64, source string) {
	if v, ok := p[chip.Name]; ok {
		return v, PriceFlag
	}
	if chip.PriceUSDPerGPUHour > 0 {
		return chip.PriceUSDPerGPUHour, fmt.Sprintf("%s (%s)", chip.PriceSource, chip.PriceDate)
	}
	return 0, ""
}
