package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/xcloak/xcloak/internal/cli"
	"github.com/xcloak/xcloak/migrations"
)

// migrate creates the database when missing and applies every pending
// migration, then prints the schema version.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "migrate", "[flags]",
		"Creates the database if it does not exist and applies every pending\n"+
			"schema migration. Safe to run while other instances do the same.\n")
	cfg, err := loadConfig(fs, args, getenv, stdout, stderr, forMigrate)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	version, err := prepareDatabase(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database %s at schema version %d\n", mustDatabaseLabel(cfg.DatabaseURL), version)
	if known := migrations.Latest(); version > known {
		fmt.Fprintf(stdout, "the schema is newer than this build's (%d): a newer XCloak migrated it\n", known)
	}
	return nil
}
