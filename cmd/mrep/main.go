// Command mrep ingests module dumps into SQLite, keeps the history of runs, and reports what
// limits a transformer on a chip. See the README for the workflow.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

func main() {
	app := NewApp(Env{Now: clock()})
	app.ExitErrHandler = func(c *cli.Context, err error) {
		if err == nil {
			return
		}
		code := 1
		if ec, ok := err.(cli.ExitCoder); ok {
			code = ec.ExitCode()
		}
		fmt.Fprintf(c.App.ErrWriter, "mrep: %s\n", visibleLines(err.Error()))
		os.Exit(code)
	}
	if err := app.Run(interspersed(app, os.Args)); err != nil {
		fmt.Fprintf(os.Stderr, "mrep: %s\n", visibleLines(err.Error()))
		os.Exit(1)
	}
}

// clock is time.Now, or the fixed SOURCE_DATE_EPOCH when set, so regenerated reports and
// databases are reproducible.
func clock() func() time.Time {
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
			t := time.Unix(sec, 0).UTC()
			return func() time.Time { return t }
		}
	}
	return time.Now
}
