package steps

// DefragState is what the decision found, for the Lease intent and the status.
type DefragState struct {
	Token  string // the pass due ("" none)
	Target int    // the ordinal asked to defragment, -1 none
	Held   string // why no member is asked now
	Next   string // the pass due, when target finishes an earlier one (token) first
	Done   int    // members done for this pass
	Todo   int    // members that still need it
}
