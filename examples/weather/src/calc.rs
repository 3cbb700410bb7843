//! A small arithmetic evaluator: numbers, + - * /, unary minus, parentheses.

/// Evaluates `expression`, or says what is wrong with it.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    let mut parser = Parser { chars: expression.chars().filter(|c| !c.is_whitespace()).collect(), pos: 0 };
    let value = parser.sum()?;
    if parser.pos != parser.chars.len() {
        return Err(format!("unexpected `{}` at position {}", parser.chars[parser.pos], parser.pos + 1));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number (division by zero?)".to_owned());
    }
    Ok(value)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.pos += 1;
            let rhs = self.unary()?;
            value = if op == '*' { value * rhs } else { value / rhs };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, String> {
        if self.peek() == Some('-') {
            self.pos += 1;
            return Ok(-self.unary()?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing `)`".to_owned());
                }
                self.pos += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.pos += 1;
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                text.parse().map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.pos + 1)),
            None => Err("the expression ends too early".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    #[test]
    fn evaluates_with_precedence_and_parentheses() {
        assert_eq!(evaluate("1 + 2 * 3"), Ok(7.0));
        assert_eq!(evaluate("(1 + 2) * 3"), Ok(9.0));
        assert_eq!(evaluate("-4 / 2 + .5"), Ok(-1.5));
    }

    #[test]
    fn reports_bad_input() {
        assert_eq!(evaluate("1 +"), Err("the expression ends too early".to_owned()));
        assert_eq!(evaluate("2 x 3"), Err("unexpected `x` at position 2".to_owned()));
        assert!(evaluate("1/0").is_err());
        assert_eq!(evaluate("(1"), Err("missing `)`".to_owned()));
    }
}
