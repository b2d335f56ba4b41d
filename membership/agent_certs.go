package membership

import (
	"context"
	"errors"
	"time"
)

// Certificates: the agent renews and rotates the member's certificates and hands them to etcd.

// askRenewal passes the renewal the hook asks for to Certs; a new one is looked at now, not at the next
// certLook.
// askRotation takes the CA rotation step and restart permission from the Lease; a change is looked at
// at once.
func (a *Agent) askRotation(in Intent) {
	if a.Certs == nil || (a.Certs.Rotation == in.CARotation && a.Certs.Restart == in.CARestart) {
		return
	}
	a.Certs.Rotation, a.Certs.Restart = in.CARotation, in.CARestart
	a.certChecked = time.Time{}
}

func (a *Agent) askRenewal(mark string) {
	if a.Certs == nil || a.Certs.Renewal == mark {
		return
	}
	a.Certs.Renewal = mark
	a.certChecked = time.Time{}
}

// refreshCerts runs Certs.Ensure at most once per certLook (at once while it has never succeeded) and
// keeps the outcome for the reports.
func (a *Agent) refreshCerts(ctx context.Context) error {
	if a.Certs == nil {
		return nil
	}
	look := certLook
	if a.Cfg.CertLook > 0 {
		look = a.Cfg.CertLook
	}
	if a.Certs.Rotation.Mark != "" || a.Certs.Restart != "" {
		look = min(look, rotationLook) // each step of a rotation waits for every member's look
	}
	if a.certErr == "" && a.certsReady && time.Since(a.certChecked) < look {
		return nil
	}
	retry := a.env.tick() // etcd waits for its files: look again soon
	if a.certsReady {
		retry = look // etcd runs on the files it has: a bad Secret is looked at as often as a good one
	}
	if a.certErr != "" && time.Since(a.certChecked) < retry {
		return errors.New(a.certErr)
	}
	a.certChecked = time.Now()
	// Every agent knows the declared users: a CA rotation's drop step waits for their Secrets too.
	a.readAuthWant(ctx)
	// Bounded: a hung Secret read must not hold up the supervision of etcd.
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	f, err := a.Certs.Ensure(ectx)
	cancel()
	a.certFacts = f
	if err != nil {
		if err.Error() != a.certErr {
			// Posted when the problem appears or changes, not at every look.
			kept := "etcd keeps the files it has"
			if !a.certsReady {
				kept = "etcd waits for usable files"
			}
			a.env.event(EventCertificatesInvalid, "CheckCertificates", true, "%v (%s)", err, kept)
		}
		a.certErr = err.Error()
		a.Log.Warn("certificates", "error", err)
		return err
	}
	a.certErr, a.certsReady = "", true
	a.useRootIdentity()
	return nil
}
