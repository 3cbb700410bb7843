//! `images/withdrawn`: images a provider refused, taken out of the conversation.
//!
//! A provider that refuses an image (a format or size it does not take) refuses every
//! later request too, since each one sends the history again. When a step's request
//! carrying images is refused as invalid and the same request with each image replaced
//! by a note goes through, the loop logs this event before the step's reply: from here
//! on the projection sends the note in place of each image it names, in every message
//! that carried one so far (an image attached again later is sent again), so requests
//! rebuilt from the log are the ones that were made.

use serde::{Deserialize, Serialize};

/// Data of `images/withdrawn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagesWithdrawn {
    /// The SHA-256 of each image withdrawn (lowercase hex, as in the images' references).
    pub sha256: Vec<String>,
    /// Why: the provider's refusal of the request that carried them, as it was reported.
    pub reason: String,
}

impl ImagesWithdrawn {
    /// A line for people: `2 images withdrawn: the provider refused them (…)`.
    pub fn describe(&self) -> String {
        let what = match self.sha256.len() {
            1 => "1 image withdrawn: the provider refused it".to_owned(),
            n => format!("{n} images withdrawn: the provider refused them"),
        };
        format!("{what} ({}); the model is told of each in its place", self.reason)
    }
}
