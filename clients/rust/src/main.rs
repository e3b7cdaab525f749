//! The example bot. Its whole strategy is the `impl Bot for ExampleBot` block below: replace
//! `decide` (and, if you like, `choose_rotation`) with your own logic. Everything else —
//! connecting, deadlines, fallbacks, reconnects, several matches at once — is done by the
//! `scout_client` library (src/lib.rs).

use std::process::ExitCode;

use scout_client::proto::{Action, DecisionRequest};
use scout_client::{Bot, fallback_action, hand_faces, show_strength};

/// Plays only moves from the referee's legal lists, without a rules engine: the strongest legal
/// Show (most cards; at equal count a set beats a run; then the higher lowest face), else the
/// first legal Scout.
struct ExampleBot;

impl Bot for ExampleBot {
    fn decide(&self, request: &DecisionRequest) -> Action {
        let faces = hand_faces(request);
        let mut best = None;
        for show in &request.legal_shows {
            let strength = show_strength(&faces, show).unwrap_or(0);
            if best.is_none_or(|(best_strength, _)| strength > best_strength) {
                best = Some((strength, *show));
            }
        }
        if let Some((_, show)) = best {
            return show.into();
        }
        match request.legal_scouts.first() {
            Some(scout) => (*scout).into(),
            None => fallback_action(request),
        }
    }
}

fn main() -> ExitCode {
    scout_client::cli::main(ExampleBot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scout_client::proto::{Card, End, Observation, Scout, Show};

    fn request(hand: &[i32], shows: &[(i32, i32)], scouts: &[Scout]) -> DecisionRequest {
        DecisionRequest {
            observation: Some(Observation {
                hand: hand.iter().map(|&face| Card { face, other: 1 }).collect(),
                ..Default::default()
            }),
            legal_shows: shows
                .iter()
                .map(|&(start, length)| Show { start, length })
                .collect(),
            legal_scouts: scouts.to_vec(),
            ..Default::default()
        }
    }

    fn show(start: i32, length: i32) -> Action {
        Show { start, length }.into()
    }

    #[test]
    fn prefers_more_cards() {
        let hand = [9, 9, 3, 4, 5];
        let decision = request(&hand, &[(0, 1), (0, 2), (2, 3), (4, 1)], &[]);
        assert_eq!(ExampleBot.decide(&decision), show(2, 3));
    }

    #[test]
    fn prefers_a_set_to_a_run_of_the_same_length() {
        let hand = [8, 9, 2, 2];
        let decision = request(&hand, &[(0, 2), (2, 2)], &[]);
        assert_eq!(ExampleBot.decide(&decision), show(2, 2));
    }

    #[test]
    fn then_the_higher_lowest_face() {
        let hand = [3, 4, 7, 8, 6];
        let decision = request(&hand, &[(0, 2), (2, 2), (4, 1)], &[]);
        assert_eq!(ExampleBot.decide(&decision), show(2, 2));
    }

    #[test]
    fn scouts_first_legal_scout_without_a_show() {
        let first = Scout {
            end: End::Left.into(),
            flip: false,
            insert_at: 0,
        };
        let second = Scout {
            insert_at: 1,
            ..first
        };
        let decision = request(&[1, 2], &[], &[first, second]);
        assert_eq!(ExampleBot.decide(&decision), first.into());
    }
}
