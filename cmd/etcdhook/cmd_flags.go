package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/api/resource"
)

// logLevel is every command's --log-level (one command runs per process); serve can also change it at
// run time (/debug/log-level).
var logLevel slog.LevelVar

// addLogLevel registers --log-level on a command's flags.
func addLogLevel(fs *flag.FlagSet) {
	fs.TextVar(&logLevel, "log-level", new(slog.LevelVar), "debug, info, warn or error") // the zero LevelVar is info
}

// parseFlags adds --log-level to a command's flags, parses args and checks that the required flags are
// not empty: bad input is a usage error, which names every required flag.
func parseFlags(fs *flag.FlagSet, args []string, required ...string) error {
	addLogLevel(fs)
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			return usageError{fmt.Errorf("%s are required", flagList(required))}
		}
	}
	return nil
}

// flagList is "--a, --b and --c".
func flagList(names []string) string {
	out := ""
	for i, name := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			out += " and "
		default:
			out += ", "
		}
		out += "--" + name
	}
	return out
}

// parseSize reads --size, a claim size: a positive Kubernetes quantity.
func parseSize(size string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(size)
	if err != nil || q.Sign() <= 0 {
		return q, usageError{errors.New("--size must be a positive quantity such as 20Gi")}
	}
	return q, nil
}
