package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/store"
)

func newMigrateCommand(g *globals) *cobra.Command {
	var databaseURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: onStore(&databaseURL, func(cmd *cobra.Command, _ []string, db *store.Store) error {
			applied, err := db.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "applied %d migrations %v\n", len(applied), applied)
			return nil
		}),
	}
	addDatabaseURL(cmd.Flags(), &databaseURL, required)
	return cmd
}
