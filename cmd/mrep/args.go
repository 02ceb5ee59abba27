package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a subcommand's positional arguments after its flags, so that
// `mrep analyze RUN --chip H200` works as users type it: urfave/cli v2 stops parsing flags at
// the first positional argument. Which flags take a value comes from the command's own
// definitions; "--" ends flag parsing as usual.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// global flags come before the subcommand
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if !strings.Contains(args[i], "=") && takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	// `mrep plan train ...`: descend to the subcommand whose flags apply
	for i+1 < len(args) && len(cmd.Subcommands) > 0 {
		sub := cmd.Command(args[i+1])
		if sub == nil {
			break
		}
		cmd, i = sub, i+1
	}
	out := append([]string{}, args[:i+1]...)
	var positional []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			positional = append(positional, rest[j:]...)
			j = len(rest)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			out = append(out, a)
			if !strings.Contains(a, "=") && takesValue(cmd.Flags, a) && j+1 < len(rest) {
				out = append(out, rest[j+1])
				j++
			}
		default:
			positional = append(positional, a)
		}
	}
	return append(out, positional...)
}

func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
