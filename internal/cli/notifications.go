package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/store"
)

// newNotificationsCommand is `datajobs notifications`: the e-mail recipients the
// dispatcher suppresses after a permanent refusal (docs/notifications.md).
func newNotificationsCommand(g *globals) *cobra.Command {
	var databaseURL string
	cmd := &cobra.Command{Use: "notifications", Short: "Inspect and lift the suppression of bounced notification recipients (docs/notifications.md)", Args: cobra.NoArgs}
	addDatabaseURL(cmd.PersistentFlags(), &databaseURL, required)
	list := &cobra.Command{
		Use:   "suppressions",
		Short: "List the e-mail recipients sent nothing because their server refused them for good",
		Args:  cobra.NoArgs,
		RunE: onStore(&databaseURL, func(cmd *cobra.Command, _ []string, db *store.Store) error {
			sups, err := db.Suppressions(cmd.Context(), notify.ChannelEmail, time.Now())
			if err != nil {
				return err
			}
			for _, sp := range sups {
				until := "until removed"
				if sp.Until != nil {
					until = "until " + sp.Until.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(g.stdout, "%s\tsince %s\t%s\t%s\n", sp.Recipient, sp.At.UTC().Format(time.RFC3339), until, sp.Reason)
			}
			return nil
		}),
	}
	unsuppress := &cobra.Command{
		Use:   "unsuppress ADDRESS",
		Short: "Lift the suppression of an e-mail recipient: the next events are mailed to it again",
		Args:  cobra.ExactArgs(1),
		RunE: onStore(&databaseURL, func(cmd *cobra.Command, args []string, db *store.Store) error {
			addr := strings.ToLower(strings.TrimSpace(args[0]))
			removed, err := db.RemoveSuppression(cmd.Context(), notify.ChannelEmail, addr)
			if err != nil {
				return err
			}
			if !removed {
				return fmt.Errorf("%s is not suppressed (`datajobs notifications suppressions` lists who is)", addr)
			}
			fmt.Fprintf(g.stdout, "%s is no longer suppressed\n", addr)
			return nil
		}),
	}
	cmd.AddCommand(list, unsuppress)
	return cmd
}
