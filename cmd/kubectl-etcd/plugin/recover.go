package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// runRecover shows the hook's plan for a quorum that lost its data (status.recovery: the freshest
// survivor, what each member holds, what is lost) and, with --apply, carries it out: the annotation
// etcd.io/recover-apply names the plan's token, so a plan that changed since it was shown is not the one
// applied (the hook refuses a token that is not its current plan). docs/design/19-recovery.md.
func runRecover(ctx context.Context, env Env, args []string) error {
	o, fs := requestFlagSet("recover", env, requestFlags{
		idHelp:   "with --apply: the plan's token as --plan showed it (default: the plan shown now)",
		waitHelp: "with --apply: wait until the cluster is recovered",
		timeout:  30 * time.Minute,
	})
	apply := fs.Bool("apply", false, "carry the plan out (annotation etcd.io/recover-apply=TOKEN)")
	fs.Bool("plan", true, "show the plan (the default; nothing is changed)")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName("recover", fs.Args()); err != nil {
		return err
	}
	c, u, err := o.cluster(ctx, env)
	if err != nil {
		return err
	}
	snap, err := snapshotOf(u)
	if err != nil {
		return err
	}
	rs := snap.status.Recovery
	if rs == nil {
		return fmt.Errorf("%s/%s has no recovery plan: a voter reports a healthy cluster, or it is being recovered from a backup", c.Namespace, o.name)
	}
	printPlan(env, rs)
	if !*apply {
		return nil
	}
	switch {
	case rs.Token == "":
		return fmt.Errorf("no plan to apply yet: %s", rs.Message)
	case o.token != "" && o.token != rs.Token:
		return fmt.Errorf("the plan is %s now, not %s: run kubectl etcd recover %s --plan again", rs.Token, o.token, o.name)
	}
	o.token = rs.Token
	if err := o.ask(ctx, env, c, api.AnnRecoverApply, "recovery %s of %s/%s applied"); err != nil || !o.wait {
		return err
	}
	last := ""
	return o.follow(ctx, env, c, func(s *Snapshot) (bool, error) {
		r := s.status.Recovery
		line := "recovered: every member rejoined"
		if r != nil {
			line = r.Phase + ": " + r.Message
		}
		if line != last {
			last = line
			fmt.Fprintln(env.Out, "  "+line)
		}
		return r == nil && s.status.Phase == api.PhaseRunning, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for recovery %s of %s/%s (last: %s)", o.timeout, o.token, c.Namespace, o.name, last)
	})
}

// printPlan writes status.recovery for a person.
func printPlan(env Env, rs *api.RecoveryStatus) {
	fmt.Fprintf(env.Out, "phase:    %s\n", rs.Phase)
	if rs.Survivor != "" {
		fmt.Fprintf(env.Out, "survivor: %s (revision %d, raft term %d)\n", rs.Survivor, rs.Revision, rs.RaftTerm)
		fmt.Fprintf(env.Out, "token:    %s\n", rs.Token)
	}
	for _, m := range rs.Members {
		fmt.Fprintf(env.Out, "  %-20s %-17s %s\n", m.Name, m.MemberID, m.Holds)
	}
	if rs.Loses != "" {
		fmt.Fprintf(env.Out, "loses:    %s\n", rs.Loses)
	}
	if rs.Message != "" {
		fmt.Fprintf(env.Out, "%s\n", rs.Message)
	}
}
