//! Small helpers for reading requests and building answers. Not a rules engine: the referee's
//! legal lists (`DecisionRequest::legal_shows` / `legal_scouts`) say what may be played; these
//! functions only read faces and compare groups with the engine's documented strength formula.

use crate::proto::action::Kind;
use crate::proto::{
    Action, Card, DecisionRequest, End, RotationRequest, Scout, ScoutAndShow, Show,
};

impl From<Show> for Action {
    fn from(show: Show) -> Self {
        Action {
            kind: Some(Kind::Show(show)),
        }
    }
}

impl From<Scout> for Action {
    fn from(scout: Scout) -> Self {
        Action {
            kind: Some(Kind::Scout(scout)),
        }
    }
}

impl From<ScoutAndShow> for Action {
    fn from(combo: ScoutAndShow) -> Self {
        Action {
            kind: Some(Kind::ScoutAndShow(combo)),
        }
    }
}

/// The face values of `cards`, leftmost first.
pub fn faces(cards: &[Card]) -> Vec<i32> {
    cards.iter().map(|card| card.face).collect()
}

/// The face values of the hand in a decision request, leftmost first.
pub fn hand_faces(request: &DecisionRequest) -> Vec<i32> {
    request
        .observation
        .as_ref()
        .map(|observation| faces(&observation.hand))
        .unwrap_or_default()
}

/// The dealt hand of a rotation request as it would be after rotating: reversed, every card
/// turned.
pub fn rotated(request: &RotationRequest) -> Vec<Card> {
    request
        .hand
        .iter()
        .rev()
        .map(|card| Card {
            face: card.other,
            other: card.face,
        })
        .collect()
}

/// The strength of a group of faces, or `None` when they are neither a set nor a run.
///
/// This is the engine's own formula: `32·length + (16 if set) + lowest face`. More cards beat
/// fewer; at equal length a set beats a run; then the higher lowest face wins. A group beats
/// another iff its strength is greater. A single card is a set.
pub fn group_strength(faces: &[i32]) -> Option<u32> {
    let lowest = *faces.iter().min()?;
    let is_set = faces.windows(2).all(|pair| pair[1] == pair[0]);
    let is_run = faces.len() >= 2
        && [-1, 1]
            .iter()
            .any(|step| faces.windows(2).all(|pair| pair[1] - pair[0] == *step));
    if !is_set && !is_run {
        return None;
    }
    let length = u32::try_from(faces.len()).ok()?;
    let lowest = u32::try_from(lowest).ok()?;
    Some(32 * length + if is_set { 16 } else { 0 } + lowest)
}

/// The faces a Show would play from `hand_faces`, or `None` when it is out of range.
pub fn shown_faces<'a>(hand_faces: &'a [i32], show: &Show) -> Option<&'a [i32]> {
    let start = usize::try_from(show.start).ok()?;
    let length = usize::try_from(show.length).ok()?;
    if length == 0 {
        return None;
    }
    hand_faces.get(start..start.checked_add(length)?)
}

/// The strength of the group a Show would play from `hand_faces` (see [`group_strength`]).
pub fn show_strength(hand_faces: &[i32], show: &Show) -> Option<u32> {
    group_strength(shown_faces(hand_faces, show)?)
}

/// The referee's documented fallback for a decision: the first legal Show if any, otherwise
/// `Scout{END_LEFT, flip: false, insert_at: 0}`. It is always legal.
pub fn fallback_action(request: &DecisionRequest) -> Action {
    match request.legal_shows.first() {
        Some(show) => (*show).into(),
        None => Scout {
            end: End::Left.into(),
            flip: false,
            insert_at: 0,
        }
        .into(),
    }
}

/// Why `action` would surely be rejected as an answer to `request`, or `Ok` when it is a listed
/// legal Show or Scout, or a Scout & Show whose parts check out against the hand and the
/// active set. The client sends the fallback instead of an answer that fails this check.
pub fn check_action(request: &DecisionRequest, action: &Action) -> Result<(), String> {
    let active = request
        .observation
        .as_ref()
        .map(|observation| observation.active_set.as_slice())
        .unwrap_or_default();
    match &action.kind {
        None => Err("the action has no kind (Show, Scout or ScoutAndShow)".into()),
        Some(Kind::Show(show)) if request.legal_shows.contains(show) => Ok(()),
        Some(Kind::Show(show)) => Err(format!("{show:?} is not among the legal shows")),
        Some(Kind::Scout(scout)) if is_listed_scout(request, active, scout) => Ok(()),
        Some(Kind::Scout(scout)) => Err(format!("{scout:?} is not among the legal scouts")),
        Some(Kind::ScoutAndShow(combo)) => check_scout_and_show(request, active, combo),
    }
}

fn is_listed_scout(request: &DecisionRequest, active: &[Card], scout: &Scout) -> bool {
    // A one-card active set is listed with END_LEFT only; END_RIGHT names the same card.
    let mut scout = *scout;
    if active.len() == 1 && scout.end() == End::Right {
        scout.set_end(End::Left);
    }
    request.legal_scouts.contains(&scout)
}

fn check_scout_and_show(
    request: &DecisionRequest,
    active: &[Card],
    combo: &ScoutAndShow,
) -> Result<(), String> {
    if !request.scout_and_show_available {
        return Err("Scout & Show is not available now".into());
    }
    let (Some(scout), Some(show)) = (combo.scout, combo.show) else {
        return Err("a Scout & Show needs both its Scout and its Show part".into());
    };
    if !is_listed_scout(request, active, &scout) {
        return Err(format!(
            "the Scout part {scout:?} is not among the legal scouts"
        ));
    }
    let (taken, rest) = match scout.end() {
        End::Right => active.split_last(),
        _ => active.split_first(),
    }
    .ok_or("there is no active set to scout from")?;
    let mut hand = hand_faces(request);
    let insert_at = usize::try_from(scout.insert_at).unwrap_or(usize::MAX);
    if insert_at > hand.len() {
        return Err(format!("insert_at {insert_at} is outside the hand"));
    }
    hand.insert(insert_at, if scout.flip { taken.other } else { taken.face });
    let strength = show_strength(&hand, &show)
        .ok_or_else(|| format!("the Show part {show:?} is not a set or run of the new hand"))?;
    let to_beat = if rest.is_empty() {
        0
    } else {
        group_strength(&faces(rest)).unwrap_or(0)
    };
    if strength > to_beat {
        Ok(())
    } else {
        Err(format!(
            "the Show part {show:?} does not beat what remains of the active set"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Observation;

    fn card(face: i32, other: i32) -> Card {
        Card { face, other }
    }

    fn show(start: i32, length: i32) -> Show {
        Show { start, length }
    }

    fn scout(end: End, flip: bool, insert_at: i32) -> Scout {
        Scout {
            end: end.into(),
            flip,
            insert_at,
        }
    }

    #[test]
    fn strength_follows_the_engine_formula() {
        assert_eq!(group_strength(&[5]), Some(32 + 16 + 5));
        assert_eq!(group_strength(&[5, 5, 5]), Some(96 + 16 + 5));
        assert_eq!(group_strength(&[3, 4, 5, 6]), Some(128 + 3));
        assert_eq!(group_strength(&[8, 7, 6]), Some(96 + 6));
        assert_eq!(group_strength(&[3, 4, 3]), None);
        assert_eq!(group_strength(&[9, 2]), None);
        assert_eq!(group_strength(&[]), None);
        // More cards beat fewer; a set beats a run of the same length.
        assert!(group_strength(&[1, 2, 3]) > group_strength(&[9, 9]));
        assert!(group_strength(&[2, 2]) > group_strength(&[8, 9]));
    }

    #[test]
    fn show_strength_reads_the_positions() {
        let hand = [9, 2, 6, 2, 7, 5, 2, 1, 3, 4, 6, 1];
        assert_eq!(show_strength(&hand, &show(6, 2)), Some(64 + 1));
        assert_eq!(show_strength(&hand, &show(11, 2)), None);
        assert_eq!(show_strength(&hand, &show(0, 0)), None);
    }

    #[test]
    fn rotation_reverses_and_turns() {
        let request = RotationRequest {
            hand: vec![card(3, 1), card(8, 6), card(5, 9)],
            ..Default::default()
        };
        assert_eq!(rotated(&request), vec![card(9, 5), card(6, 8), card(1, 3)]);
    }

    fn transcript_request() -> DecisionRequest {
        // Seat 0, request 7 of the transcript in docs/PROTOCOL.md §15.
        let hand = [
            (9, 5),
            (2, 9),
            (6, 7),
            (2, 8),
            (7, 4),
            (5, 8),
            (3, 4),
            (4, 2),
            (6, 8),
            (1, 3),
        ];
        let mut scouts = Vec::new();
        for end in [End::Left, End::Right] {
            for flip in [false, true] {
                for insert_at in 0..=10 {
                    scouts.push(scout(end, flip, insert_at));
                }
            }
        }
        DecisionRequest {
            observation: Some(Observation {
                hand: hand.iter().map(|&(f, o)| card(f, o)).collect(),
                active_set: vec![card(5, 3), card(5, 7), card(5, 6)],
                active_owner: Some(2),
                ..Default::default()
            }),
            legal_scouts: scouts,
            scout_and_show_available: true,
            ..Default::default()
        }
    }

    #[test]
    fn fallback_is_the_first_show_or_the_documented_scout() {
        let mut request = transcript_request();
        assert_eq!(fallback_action(&request), scout(End::Left, false, 0).into());
        request.legal_shows = vec![show(2, 1), show(3, 2)];
        assert_eq!(fallback_action(&request), show(2, 1).into());
    }

    #[test]
    fn checks_listed_actions() {
        let request = transcript_request();
        assert!(check_action(&request, &scout(End::Right, true, 10).into()).is_ok());
        assert!(check_action(&request, &scout(End::Right, true, 11).into()).is_err());
        assert!(check_action(&request, &show(6, 2).into()).is_err());
        assert!(check_action(&request, &Action::default()).is_err());
    }

    #[test]
    fn checks_scout_and_show_against_the_new_hand() {
        let request = transcript_request();
        let combo = |scout, show| -> Action {
            ScoutAndShow {
                scout: Some(scout),
                show: Some(show),
            }
            .into()
        };
        // The two legal examples of PROTOCOL.md §5.4.
        assert_eq!(
            check_action(&request, &combo(scout(End::Left, false, 8), show(6, 4))),
            Ok(())
        );
        assert_eq!(
            check_action(&request, &combo(scout(End::Right, true, 2), show(2, 2))),
            Ok(())
        );
        // Not a group of the new hand (4 5 6 1), and a group too weak to beat 5-5 (3 4).
        assert!(check_action(&request, &combo(scout(End::Left, false, 8), show(7, 4))).is_err());
        assert!(check_action(&request, &combo(scout(End::Left, false, 8), show(6, 2))).is_err());
        // 3 4 5 is a 3-card run of the new hand: it beats the remaining 5-5.
        assert_eq!(
            check_action(&request, &combo(scout(End::Left, false, 8), show(6, 3))),
            Ok(())
        );
        let mut unavailable = request.clone();
        unavailable.scout_and_show_available = false;
        assert!(
            check_action(&unavailable, &combo(scout(End::Left, false, 8), show(6, 4))).is_err()
        );
    }

    #[test]
    fn one_card_active_set_accepts_either_end() {
        let mut request = transcript_request();
        let observation = request.observation.as_mut().unwrap();
        observation.active_set.truncate(1);
        request.legal_scouts.retain(|s| s.end() == End::Left);
        assert!(check_action(&request, &scout(End::Right, false, 3).into()).is_ok());
    }
}
