package core

import "testing"

// TestABeaconIsValidatedAtCreation: a beacon's URL and round are checked
// when the room is created.
func TestABeaconIsValidatedAtCreation(t *testing.T) {
	for _, b := range []RoomBeacon{{URL: "ftp://x/y", Round: 1}, {URL: "https://x", Round: 0}, {URL: "https://u:p@x", Round: 1},
		{URL: "https://x/?q=1", Round: 1}, {Round: 3}, {URL: "https://", Round: 1}} {
		if CodeOf(b.validate()) != CodeBadRequest {
			t.Errorf("the beacon %+v was accepted", b)
		}
	}
	if err := (RoomBeacon{URL: "https://api.drand.sh/52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971", Round: 1000}).validate(); err != nil {
		t.Errorf("drand's quicknet refused: %v", err)
	}
}
