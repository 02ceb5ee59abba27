// Command mrep ingests module dumps into SQLite, keeps the history of runs, and reports what
// limits a transformer on a chip. See the README for the workflow.
package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

func main() {
	app := NewApp(Env{Now: clock(), Who: whoAmI})
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

// whoAmI is who a team's history records as the ingester of the runs this process stores:
// MREP_INGESTED_BY when set (a job can name itself: "sweep3 job 4711"), else user@host; none
// under SOURCE_DATE_EPOCH, so that a reproducible build's database does not depend on the
// machine.
func whoAmI() string {
	if v, ok := os.LookupEnv("MREP_INGESTED_BY"); ok {
		return v
	}
	if os.Getenv("SOURCE_DATE_EPOCH") != "" {
		return ""
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "" && host == "":
		return ""
	case host == "":
		return name
	}
	return name + "@" + host
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
