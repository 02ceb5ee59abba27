// Command scaledump writes the scale-benchmark dump: go run ./internal/scaledump/cmd OUT [MODULES TENSORS].
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/mrep-dev/mrep/internal/scaledump"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scaledump OUT.json [MODULES TENSORS]")
		os.Exit(2)
	}
	mods, tens := 200000, 500000
	if len(os.Args) == 4 {
		mods, _ = strconv.Atoi(os.Args[2])
		tens, _ = strconv.Atoi(os.Args[3])
	}
	if err := scaledump.Write(os.Args[1], mods, tens); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
