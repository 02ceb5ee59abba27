package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/runref"
)

// modelsCommand lists the zoo: the models every command takes by name, no ingest needed.
func modelsCommand() *cli.Command {
	return &cli.Command{
		Name:  "models",
		Usage: "list the model zoo shipped in the binary (any command taking a RUN takes these names, no ingest needed)",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output"}},
		Action: func(c *cli.Context) error {
			zoo, err := runref.Zoo()
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, zoo)
			}
			return render.WriteZoo(c.App.Writer, zoo)
		},
	}
}
