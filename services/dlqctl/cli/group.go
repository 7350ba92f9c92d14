package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// group makes cmd, a command with subcommands, answer only its own words:
// a word that is none of its subcommands is a usage error (exit 2) naming
// them, never its help with exit 0 (cobra's answer for a command that
// runs nothing itself). A group that runs nothing itself, given no word,
// prints its help (exit 0), as `dlqctl` alone does; one that runs
// something (drain) still runs it. Call it after adding the subcommands.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return unknownSubcommand(c, args[0])
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
	}
	if cmd.Run == nil && cmd.RunE == nil {
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	return cmd
}

// unknownSubcommand is the usage error of a word that is none of cmd's
// subcommands: the words it knows, and the closest ones when there are.
func unknownSubcommand(cmd *cobra.Command, word string) error {
	msg := "unknown command " + quote(word) + " for " + quote(cmd.CommandPath())
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return usageErrorf("%s; the commands of %s are: %s", msg, cmd.CommandPath(), strings.Join(subcommandWords(cmd), ", "))
}

// subcommandWords lists the available subcommands of cmd, each with its
// aliases in parentheses ("list (ls)").
func subcommandWords(cmd *cobra.Command) []string {
	var out []string
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		w := c.Name()
		if len(c.Aliases) > 0 {
			w += " (" + strings.Join(c.Aliases, ", ") + ")"
		}
		out = append(out, w)
	}
	return out
}

// quote is s in double quotes, as cobra quotes a command's words.
func quote(s string) string { return `"` + s + `"` }

// helpCommand is `dlqctl help [command]`: the help of a command, and a
// usage error (exit 2) for a word that names none, where cobra's own help
// command prints "Unknown help topic" and the root's help with exit 0.
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command of dlqctl: dlqctl help drain status.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if len(rest) > 0 {
				return unknownSubcommand(cmd, rest[0])
			}
			return cmd.Help()
		},
	}
}
