package render

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// tlsStatus gathers what the members' agents report of their certificate files (docs/design/14-tls.md §14.4):
// the CAs they trust, the earliest CA expiry and the earliest member certificate expiry. Only fresh
// reports count: a dead member's last word says nothing about the files in use now. Nil without TLS.
func tlsStatus(f *facts.Facts, d *steps.Decision) *api.TLSStatus {
	if !d.HasSpec || d.TLSSw.Mode == steps.TLSPlain && !d.TLSSw.Final {
		return nil
	}
	st := &api.TLSStatus{Switch: d.TLSSw.Status}
	seen := map[string]bool{}
	earliest := func(cur *metav1.Time, s string) *metav1.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return cur // absent or hand-edited: not a fact
		}
		if cur == nil || t.Before(cur.Time) {
			return &metav1.Time{Time: t.UTC()}
		}
		return cur
	}
	for _, lv := range f.SortedLeases() {
		if !lv.Fresh {
			continue
		}
		r := lv.Report
		for _, fp := range strings.Split(r.TLSCAs, ",") {
			if fp != "" && !seen[fp] {
				seen[fp] = true
				st.CAFingerprints = append(st.CAFingerprints, fp)
			}
		}
		st.CANotAfter = earliest(st.CANotAfter, r.TLSCANotAfter)
		st.CertNotAfter = earliest(st.CertNotAfter, r.TLSCertNotAfter)
	}
	sort.Strings(st.CAFingerprints)
	if mark := d.RenewalMark(f); mark != "" {
		rn := &api.CertRenewal{Request: steps.RenewRequest(f)}
		for _, m := range f.Truth.Members {
			if m.Ordinal < 0 {
				continue
			}
			rn.Members++
			if lv := f.Leases[m.Ordinal]; lv != nil && lv.Fresh && lv.Report.MemberID == m.ID && lv.Report.TLSRenewal == mark {
				rn.Renewed++
			}
		}
		st.Renewal = rn
	}
	st.CARotation = d.CARot.Status
	return st
}

// tlsConditions: CertificatesExpiring when a certificate in use expires within api.CertExpiringDays
// (built-in ones are replaced at 2/3 of their lifetime, 30 days ahead with the defaults, so this means
// renewal is failing); CertificatesInvalid when an agent reports certificates it cannot use.
func tlsConditions(f *facts.Facts, d *steps.Decision, st *api.TLSStatus, add func(typ string, ok bool, reason, msg string), users []string) {
	soon := f.Now.Add(api.CertExpiringDays * 24 * time.Hour)
	var expiring []string
	if st != nil && st.CANotAfter != nil && st.CANotAfter.Time.Before(soon) {
		expiring = append(expiring, "CA expires "+st.CANotAfter.UTC().Format(time.RFC3339))
	}
	if st != nil && st.CertNotAfter != nil && st.CertNotAfter.Time.Before(soon) {
		expiring = append(expiring, "a member certificate expires "+st.CertNotAfter.UTC().Format(time.RFC3339))
	}
	expiring = append(expiring, users...)
	if len(expiring) > 0 {
		add(api.CondCertificatesExpiring, true, "ExpiresSoon", strings.Join(expiring, "; "))
	}
	// One condition for everything unusable: the user's Secrets as the hook sees them, and what the
	// agents report of the files they were handed.
	var invalid []string
	reason := "MemberReports"
	if len(d.CertProblems) > 0 {
		reason = "SecretUnusable"
		for _, c := range d.CertProblems {
			invalid = append(invalid, c.String())
		}
		switch {
		case d.CertBlocked && !d.HasSpec:
			invalid[len(invalid)-1] += " (nothing is created until the Secrets are usable)"
		case d.CertBlocked:
			invalid[len(invalid)-1] += keptNote(f, d)
		default:
			invalid[len(invalid)-1] += " (the members keep using the certificates they have)"
		}
	}
	// Members that trust different CAs cannot talk to each other, outside a CA rotation (where it is a
	// passing state, below): say which trusts what.
	leases := f.SortedLeases() // once: this runs on every sync
	byCAs := map[string][]string{}
	for _, lv := range leases {
		if lv.Fresh && lv.Report.TLSCAs != "" {
			byCAs[lv.Report.TLSCAs] = append(byCAs[lv.Report.TLSCAs], f.Names.Pod(lv.Ordinal))
		}
	}
	// A rotation in progress has members trusting different sets on purpose (docs/design/14-tls.md §14.6).
	if len(byCAs) > 1 && !d.CARot.Active {
		if reason == "MemberReports" && len(invalid) == 0 {
			reason = "CAMismatch"
		}
		var parts []string
		for _, cas := range slices.Sorted(maps.Keys(byCAs)) {
			parts = append(parts, fmt.Sprintf("%s trust %s", strings.Join(byCAs[cas], ", "), cas))
		}
		invalid = append(invalid, "members trust different CAs: "+strings.Join(parts, "; "))
	}
	for _, lv := range leases {
		if lv.Fresh && lv.Report.Reason() == api.ReasonCertificatesInvalid {
			invalid = append(invalid, fmt.Sprintf("%s: %s", f.Names.Pod(lv.Ordinal), lv.Report.Error))
		}
	}
	if len(invalid) > 0 {
		add(api.CondCertificatesInvalid, true, reason, strings.Join(invalid, "; "))
	}
}
