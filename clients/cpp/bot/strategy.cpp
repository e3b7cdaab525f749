// ============================================================================================
//  YOUR BOT'S LOGIC LIVES HERE: replace the body of choose_action().
//
//  `request` holds everything your seat may know (request.observation(): your hand, the
//  active set, hand sizes, scores, this round's history) and the complete legal move lists
//  (request.legal_shows(), request.legal_scouts(), request.scout_and_show_available()).
//  Any entry of the legal lists can be returned as is. The kit calls this on a worker thread per
//  match, enforces the clock (it sends the documented fallback if you are too slow) and replaces
//  an answer that is not in the legal lists by that fallback, so a bug costs a move, not a strike.
//  Helpers: scout/helpers.hpp (group_strength, show_strength, is_group, fallback_action, ...).
// ============================================================================================
#include "strategy.hpp"

#include "scout/helpers.hpp"

scout::v1::Action choose_action(const scout::v1::DecisionRequest& request) {
    const auto& hand = request.observation().hand();
    scout::v1::Action action;

    // The strongest legal Show: most cards; at equal size a set beats a run; then the higher
    // lowest face. That is exactly the engine's strength (32*length + 16*set + lowest face),
    // computed here from the hand's faces at the Show's positions. Ties keep the first listed.
    const scout::v1::Show* best = nullptr;
    int best_strength = -1;
    for (const auto& show : request.legal_shows()) {
        const int strength = scout::show_strength(hand, show);
        if (strength > best_strength) {
            best = &show;
            best_strength = strength;
        }
    }
    if (best != nullptr) {
        *action.mutable_show() = *best;
    } else if (!request.legal_scouts().empty()) {
        *action.mutable_scout() = request.legal_scouts(0);  // no Show: the first legal Scout
    } else {
        action = scout::fallback_action(request);  // cannot happen: the lists are never both empty
    }
    return action;
}
