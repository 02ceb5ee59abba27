package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/store"
)

// outputOnly are flags that change where or how an answer is written, not the answer: a
// command printed to reproduce it leaves them out.
var outputOnly = map[string]bool{"output": true, "json": true, "help": true}

// globalArgs is "mrep" and the global flags that chose the model and chips of a printed
// command: --db only for a stored run (a PostgreSQL password is never printed), --chips-file,
// and --set.
func globalArgs(c *cli.Context, fromDB bool) []string {
	args := []string{"mrep"}
	if fromDB {
		args = append(args, "--db", store.Redact(c.String("db")))
	}
	if c.IsSet("chips-file") {
		args = append(args, "--chips-file", c.String("chips-file"))
	}
	for _, kv := range c.StringSlice("set") {
		args = append(args, "--set", kv)
	}
	return args
}

// invocation is the command as the user ran it, normalised: the global flags that choose the
// model and chips (--db only for a stored run, its password never printed), the verb, the model
// as the user named it, and every flag of the verb the user set, in the verb's order, each
// value as parsed. Run as printed it gives the same answer (TestPrintedCommandsReproduce).
func invocation(c *cli.Context, sel string, fromDB bool) string {
	args := globalArgs(c, fromDB)
	// the verbs from the root down: Lineage runs from this command up to the app
	lin := c.Lineage()
	for i := len(lin) - 2; i >= 1; i-- {
		if n := lin[i]; n.Command != nil && n.Command.Name != "" && n.Command.Name != c.App.Name {
			args = append(args, n.Command.Name)
		}
	}
	args = append(args, c.Command.Name)
	if sel != "" {
		args = append(args, sel)
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if outputOnly[name] || !c.IsSet(name) {
			continue
		}
		switch v := c.Value(name).(type) {
		case bool:
			if v {
				args = append(args, "--"+name)
			} else {
				args = append(args, "--"+name+"=false")
			}
		case cli.StringSlice:
			for _, s := range v.Value() {
				args = append(args, "--"+name, s)
			}
		case []string:
			for _, s := range v {
				args = append(args, "--"+name, s)
			}
		case float64:
			args = append(args, "--"+name, strconv.FormatFloat(v, 'g', -1, 64))
		default:
			args = append(args, "--"+name, fmt.Sprint(v))
		}
	}
	return shell.Join(args...)
}
